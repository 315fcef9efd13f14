package guest

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// Init is the sandbox container's own process (PID 1 of the container):
// it reaps every orphan that the kernel reparents to it and returns when
// ctx ends, which lazaret-guest's main does on SIGTERM. Sessions are
// separate execs into the container; Init runs none of them.
func Init(ctx context.Context) error {
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	defer signal.Stop(children)
	for {
		reap()
		select {
		case <-ctx.Done():
			reap()
			return nil
		case <-children:
		}
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws unix.WaitStatus
		pid, err := sys.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
