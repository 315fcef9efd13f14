package control

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
)

func TestRecordedCoordinator(t *testing.T) {
	dir := t.TempDir()
	self, err := hostid.OpenPidfd(os.Getpid())
	if err != nil {
		t.Skipf("no pidfd here: %v", err)
	}
	defer unix.Close(self)
	id, err := hostid.IdentityOf(self)
	if err != nil {
		t.Skipf("no pidfs identity here: %v", err)
	}
	if _, _, err := RecordedCoordinator(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no file: %v", err)
	}
	if err := WriteCoordinatorIdentity(dir, id); err != nil {
		t.Fatal(err)
	}
	fd, got, err := RecordedCoordinator(dir)
	if err != nil || got != id {
		t.Fatalf("RecordedCoordinator = %v, %v", got, err)
	}
	unix.Close(fd)
	fi, err := os.Stat(filepath.Join(dir, CoordinatorName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode: %v %v", fi, err)
	}

	// A record naming a live process with another pidfs identity (here:
	// the right PID with a forged inode) pins nothing.
	forged := id
	forged.Authority.PidfsInode++
	if err := WriteCoordinatorIdentity(dir, forged); err != nil {
		t.Fatal(err)
	}
	if _, _, err := RecordedCoordinator(dir); !errors.Is(err, ErrNotRecordedCoordinator) {
		t.Fatalf("forged record: %v", err)
	}

	// A record of an exited process pins nothing.
	cmd := exec.Command("/bin/true")
	pidfd := -1
	cmd.SysProcAttr = &unix.SysProcAttr{PidFD: &pidfd}
	if err := cmd.Run(); err != nil {
		t.Skipf("running /bin/true: %v", err)
	}
	dead, err := hostid.IdentityOf(pidfd)
	unix.Close(pidfd)
	if err == nil {
		if err := WriteCoordinatorIdentity(dir, dead); err != nil {
			t.Fatal(err)
		}
		if _, _, err := RecordedCoordinator(dir); err == nil {
			t.Fatal("a dead process's record pinned a process")
		}
	}

	// Garbage is refused.
	if err := os.WriteFile(filepath.Join(dir, CoordinatorName), []byte{1, 2, 3}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCoordinatorIdentity(dir); err == nil {
		t.Fatal("garbage accepted")
	}
}
