package hostid

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/testgate"
)

func TestParseBootID(t *testing.T) {
	id, err := ParseBootID("0123abcd-4567-89ef-0123-456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if id != (BootID{0x01, 0x23, 0xab, 0xcd, 0x45, 0x67, 0x89, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}) {
		t.Fatalf("id = %x", id)
	}
	for _, bad := range []string{"", "0123abcd4567-89ef-0123-456789abcdef0", "0123abcd-4567-89ef-0123-456789abcdeg", "0123abcd-4567-89ef-0123-456789abcde"} {
		if _, err := ParseBootID(bad); err == nil {
			t.Errorf("ParseBootID(%q) accepted", bad)
		}
	}
}

func TestParseStatStartTime(t *testing.T) {
	fields := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20 21"
	cases := []struct {
		name string
		line string
		want uint64
		ok   bool
	}{
		{"plain", "42 (bash)" + fields, 987654, true},
		{"spaces and parens in comm", "42 (a) b (c) d)" + fields, 987654, true},
		{"newline", "42 (x)" + fields + "\n", 987654, true},
		{"no parens", "42 bash" + fields, 0, false},
		{"too few fields", "42 (bash) S 1 2 3", 0, false},
		{"not a number", "42 (bash) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 20", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseStatStartTime([]byte(c.line))
			if (err == nil) != c.ok || got != c.want {
				t.Fatalf("= %d, %v; want %d, ok=%v", got, err, c.want, c.ok)
			}
		})
	}
}

// requirePidfs skips (or, with LAZARET_TEST_ROOT=1, fails) where pidfds
// are unavailable or are not pidfs inodes.
func requirePidfs(t *testing.T) {
	t.Helper()
	testgate.Require(t, "pidfs process identity (Linux 6.9+)", func() error {
		fd, err := OpenPidfd(os.Getpid())
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = AuthorityOf(fd)
		return err
	})
}

func TestLiveIdentity(t *testing.T) {
	requirePidfs(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a child: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	fd, err := OpenPidfd(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	id, err := IdentityOf(fd)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := CurrentBootID()
	if err != nil {
		t.Fatal(err)
	}
	if id.Authority.BootID != boot || id.HostPID != uint32(cmd.Process.Pid) || id.StartTimeTicks == 0 || id.Authority.PidfsInode == 0 {
		t.Fatalf("identity %v (boot %x, pid %d)", id, boot, cmd.Process.Pid)
	}

	// A second pidfd for the same process has the same authority.
	fd2, err := OpenPidfd(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd2)
	a2, err := AuthorityOf(fd2)
	if err != nil || a2 != id.Authority {
		t.Fatalf("second pidfd authority %v, %v; want %v", a2, err, id.Authority)
	}
	if ok, err := PidfsRecoveryMatch(id, fd2); !ok || err != nil {
		t.Fatalf("match of the same process = %v, %v", ok, err)
	}

	// Negative evidence refutes but never upgrades.
	wrongStart := id
	wrongStart.StartTimeTicks++
	if ok, err := PidfsRecoveryMatch(wrongStart, fd2); ok || !errors.Is(err, ErrIdentityContradicted) {
		t.Fatalf("start-time mismatch = %v, %v", ok, err)
	}
	wrongPid := id
	wrongPid.HostPID++
	if ok, err := PidfsRecoveryMatch(wrongPid, fd2); ok || !errors.Is(err, ErrIdentityContradicted) {
		t.Fatalf("pid mismatch = %v, %v", ok, err)
	}

	// Another process with our recorded PID and start time is no match.
	self, err := OpenPidfd(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(self)
	selfID, err := IdentityOf(self)
	if err != nil {
		t.Fatal(err)
	}
	forged := id
	forged.HostPID, forged.StartTimeTicks = selfID.HostPID, selfID.StartTimeTicks
	if ok, err := PidfsRecoveryMatch(forged, self); ok || err != nil {
		t.Fatalf("foreign authority with matching pid/start = %v, %v; want no match", ok, err)
	}

	// After exit and reaping, the authority still decides.
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := IdentityOf(fd); !errors.Is(err, ErrProcessExited) {
		t.Fatalf("identity of a reaped process: %v", err)
	}
	if ok, err := PidfsRecoveryMatch(id, fd); !ok || err != nil {
		t.Fatalf("authority match after exit = %v, %v", ok, err)
	}
}

func TestNamespaceAndMountIdentity(t *testing.T) {
	n1, err := NamespaceOfProcess(os.Getpid(), "mnt")
	if err != nil {
		t.Fatal(err)
	}
	n2, err := NamespaceOfProcess(os.Getpid(), "mnt")
	if err != nil || n1 != n2 || n1.Inode == 0 {
		t.Fatalf("mount namespace %v then %v, %v", n1, n2, err)
	}
	u, err := NamespaceOfProcess(os.Getpid(), "user")
	if err != nil || u == n1 {
		t.Fatalf("user namespace %v, %v", u, err)
	}
	if _, err := NamespaceOfProcess(os.Getpid(), "../fd/0"); err == nil {
		t.Fatal("bad namespace kind accepted")
	}
	f, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := NamespaceOf(int(f.Fd())); !errors.Is(err, ErrNotNamespace) {
		t.Fatalf("directory as namespace: %v", err)
	}
	m, err := MountOf(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	unix.Fstat(int(f.Fd()), &st)
	if m.Inode != st.Ino || m.Device != st.Dev || m.MountID == 0 {
		t.Fatalf("mount identity %+v, stat dev %d ino %d", m, st.Dev, st.Ino)
	}
}

func TestNoPidfsRefusal(t *testing.T) {
	// An ordinary file is neither pidfs nor the anonymous inode: refused
	// with ErrNoPidfs rather than yielding a bogus authority.
	f, err := os.Open("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := AuthorityOf(int(f.Fd())); !errors.Is(err, ErrNoPidfs) {
		t.Fatalf("AuthorityOf(non-pidfd) = %v", err)
	}
}
