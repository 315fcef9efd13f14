package netpath

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// CurrentNetNS opens the calling thread's network namespace, which is the
// process's when the process never moved a thread.
func CurrentNetNS() (*os.File, error) {
	f, err := os.OpenFile("/proc/thread-self/ns/net", os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening current network namespace: %w", err)
	}
	return f, nil
}

// InNetNS runs f on a locked thread that has entered the network namespace
// ns, then returns the thread to its namespace. Sockets created by f stay
// in ns. If the thread cannot return, it is left locked and the runtime
// ends it with the goroutine.
func InNetNS(ns *os.File, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := CurrentNetNS()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering network namespace %q: %w", ns.Name(), os.NewSyscallError("setns", err))
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("returning to network namespace: %w", os.NewSyscallError("setns", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// NewNetNS creates a network namespace owned by the caller's user
// namespace and returns a descriptor that holds it.
func NewNetNS() (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := CurrentNetNS()
		if err != nil {
			res <- result{err: err}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			res <- result{err: fmt.Errorf("creating network namespace: %w", os.NewSyscallError("unshare", err))}
			return
		}
		ns, nerr := CurrentNetNS()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			if ns != nil {
				ns.Close()
			}
			res <- result{err: fmt.Errorf("returning to network namespace: %w", os.NewSyscallError("setns", err))}
			return
		}
		runtime.UnlockOSThread()
		res <- result{f: ns, err: nerr}
	}()
	r := <-res
	return r.f, r.err
}

// Sysctl writes value to /proc/sys/<key> (key with '/' separators) inside
// the network namespace ns.
func Sysctl(ns *os.File, key, value string) error {
	path := "/proc/sys/" + key
	return InNetNS(ns, func() error {
		f, err := os.OpenFile(path, os.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("setting sysctl %q: %w", path, err)
		}
		defer f.Close()
		if _, err := f.WriteString(value); err != nil {
			return fmt.Errorf("setting sysctl %q to %q: %w", path, value, err)
		}
		return nil
	})
}

// ReadSysctl reads /proc/sys/<key> inside ns, without the trailing newline.
func ReadSysctl(ns *os.File, key string) (string, error) {
	var out string
	err := InNetNS(ns, func() error {
		b, err := os.ReadFile("/proc/sys/" + key)
		if err != nil {
			return fmt.Errorf("reading sysctl %q: %w", key, err)
		}
		out = string(b)
		if n := len(out); n > 0 && out[n-1] == '\n' {
			out = out[:n-1]
		}
		return nil
	})
	return out, err
}
