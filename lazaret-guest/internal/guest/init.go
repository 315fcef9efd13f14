package guest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/initready"
	"lazaret.dev/pkg/sys"
)

// Init is the sandbox container's own process (PID 1 of the container):
// it reaps every orphan that the kernel reparents to it and returns when
// ctx ends, which lazaret-guest's main does on SIGTERM. Sessions are
// separate execs into the container; Init runs none of them.
//
// Once it handles SIGCHLD it writes initready.Line to announce (its
// standard output, which the Host Coordinator reads): that line is the
// sandbox's ready event. A failed write is reported on stderr and Init
// keeps running as the container's init; the coordinator then fails the
// start when its bound ends.
func Init(ctx context.Context, announce io.Writer) error {
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	defer signal.Stop(children)
	if err := initready.Announce(announce); err != nil {
		fmt.Fprintf(os.Stderr, "lazaret-guest init: announcing that it runs: %v\n", err)
	}
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
