package control

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/postcard"
)

// CoordinatorName is the file in a Domain's runtime directory in which the
// Host Coordinator holding the Domain lock records its own pidfs identity.
//
// The coordinator is non-dumpable, so an unprivileged CLI cannot read its
// /proc/PID/fd to see that it holds the lock. This file gives the CLI a
// candidate it can prove: a pidfd opened on the recorded host PID whose
// pidfs authority equals the recorded one is exactly that coordinator (a
// PID alone never is). A file left behind by a dead coordinator matches no
// live process.
const CoordinatorName = "coordinator"

// maxCoordinatorFile bounds what ReadCoordinatorIdentity reads.
const maxCoordinatorFile = 256

// WriteCoordinatorIdentity records id in dir/CoordinatorName.
func WriteCoordinatorIdentity(dir string, id hostid.PidfsProcessIdentityV1) error {
	return writeDomainFile(dir, CoordinatorName, postcard.Marshal(&id))
}

// ReadCoordinatorIdentity reads dir/CoordinatorName (see readDomainFile).
func ReadCoordinatorIdentity(dir string) (hostid.PidfsProcessIdentityV1, error) {
	var id hostid.PidfsProcessIdentityV1
	b, err := readDomainFile(dir, CoordinatorName, maxCoordinatorFile)
	if err != nil {
		return id, err
	}
	if err := postcard.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("decoding coordinator identity %q: %w", filepath.Join(dir, CoordinatorName), err)
	}
	return id, nil
}

// writeDomainFile writes data to dir/name: 0600, under a temporary name,
// synced, renamed into place, so that a reader sees all of it or none.
func writeDomainFile(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("writing %q: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %q: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing %q: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %q: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("installing %q: %w", path, err)
	}
	return nil
}

// readDomainFile reads dir/name, at most max bytes. The file must be a
// regular file owned by this user and not writable by group or others.
func readDomainFile(dir, name string, max int) ([]byte, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%q: not a regular file of this user writable only by it", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", path, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%q: larger than %d bytes", path, max)
	}
	return b, nil
}

// ErrNotRecordedCoordinator means the process behind a pidfd is not the
// coordinator recorded in the Domain's runtime directory.
var ErrNotRecordedCoordinator = errors.New("not the recorded coordinator")

// RecordedCoordinator pins the coordinator recorded in dir: it returns a
// pidfd whose pidfs authority equals the recorded one, with the recorded
// identity. The caller closes the pidfd.
func RecordedCoordinator(dir string) (int, hostid.PidfsProcessIdentityV1, error) {
	id, err := ReadCoordinatorIdentity(dir)
	if err != nil {
		return -1, id, err
	}
	fd, err := hostid.OpenPidfd(int(id.HostPID))
	if err != nil {
		return -1, id, fmt.Errorf("pinning recorded coordinator pid %d: %w", id.HostPID, err)
	}
	got, err := hostid.AuthorityOf(fd)
	if err != nil {
		unix.Close(fd)
		return -1, id, fmt.Errorf("identifying recorded coordinator pid %d: %w", id.HostPID, err)
	}
	if got != id.Authority {
		unix.Close(fd)
		return -1, id, fmt.Errorf("pid %d: %w (pidfs identity differs)", id.HostPID, ErrNotRecordedCoordinator)
	}
	return fd, id, nil
}
