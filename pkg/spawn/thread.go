package spawn

import (
	"os/exec"
	"runtime"
)

// Thread starts children from one goroutine locked to its OS thread for
// the life of the process. A child started with Pdeathsig through a
// Thread gets its parent-death signal only when this process dies: the
// kernel sends it when the forking thread exits, and this thread never
// does (golang/go#27505). Each Thread holds one OS thread for good.
type Thread struct {
	reqs chan func()
}

// NewThread starts the locked goroutine and returns once it holds its
// thread.
func NewThread() *Thread {
	t := &Thread{reqs: make(chan func())}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(ready)
		// The loop never ends and the goroutine never unlocks: reqs is
		// never closed, so the thread is never handed back or ended.
		for f := range t.reqs {
			f()
		}
	}()
	<-ready
	return t
}

// Start is the package's Start, with the fork made on t's thread. Set
// Pdeathsig in cmd.SysProcAttr to tie the child's life to this process.
func (t *Thread) Start(cmd *exec.Cmd) (*Process, error) {
	return start(cmd, t.fork)
}

// fork runs cmd.Start on the locked thread.
func (t *Thread) fork(cmd *exec.Cmd) error { return t.run(cmd.Start) }

// run runs f on the locked thread and returns its error.
func (t *Thread) run(f func() error) error {
	done := make(chan error, 1)
	t.reqs <- func() { done <- f() }
	return <-done
}
