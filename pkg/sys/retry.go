package sys

import (
	"errors"

	"golang.org/x/sys/unix"
)

// retry calls f until it fails with something other than EINTR.
func retry(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// retryInt is retry for calls that also return a count or a descriptor.
func retryInt(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
