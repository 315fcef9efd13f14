package hostid

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// Filesystem magic numbers from linux/magic.h.
const (
	pidfsMagic     = 0x50494446 // PIDFS_MAGIC, kernel 6.9 and later
	anonInodeMagic = 0x09041934 // ANON_INODE_FS_MAGIC, pidfds before 6.9
	nsfsMagic      = 0x6e736673 // NSFS_MAGIC
)

// Errors of live identity capture; test with errors.Is.
var (
	// ErrNoPidfs means the kernel gives pidfds no pidfs inode (Linux before
	// 6.9 backs them with the shared anonymous inode), so no durable
	// process authority exists on this host.
	ErrNoPidfs = errors.New("kernel lacks pidfs process identity (pidfds are not pidfs inodes; Linux 6.9 or later is required)")
	// ErrProcessExited means the process behind a pidfd has been reaped.
	ErrProcessExited = errors.New("process has exited")
	// ErrPidNamespace means the process has no PID in the caller's PID
	// namespace.
	ErrPidNamespace = errors.New("process is outside the caller's PID namespace")
	// ErrIdentityContradicted means the pidfs authority matches the record
	// but the negative evidence (host PID or start time) does not. The
	// process is treated as not the recorded one.
	ErrIdentityContradicted = errors.New("pidfs authority matches but host PID or start time contradicts the record")
	// ErrNoMountID means statx returned no mount ID.
	ErrNoMountID = errors.New("statx returned no mount ID")
	// ErrNotNamespace means a descriptor is not an nsfs namespace.
	ErrNotNamespace = errors.New("descriptor is not a namespace (nsfs)")
)

const bootIDPath = "/proc/sys/kernel/random/boot_id"

// CurrentBootID reads the boot ID of the running kernel.
func CurrentBootID() (BootID, error) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return BootID{}, fmt.Errorf("reading boot ID: %w", err)
	}
	id, err := ParseBootID(string(bytes.TrimSuffix(b, []byte("\n"))))
	if err != nil {
		return BootID{}, fmt.Errorf("reading boot ID from %q: %w", bootIDPath, err)
	}
	return id, nil
}

// ParseBootID parses the canonical 36-character UUID text of a boot ID
// (8-4-4-4-12 hexadecimal groups).
func ParseBootID(s string) (BootID, error) {
	var id BootID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("parsing boot ID %q: want 8-4-4-4-12 hexadecimal groups", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return id, fmt.Errorf("parsing boot ID %q: %w", s, err)
	}
	return id, nil
}

// OpenPidfd opens a pidfd for pid. The kernel always sets O_CLOEXEC on it;
// the caller owns the descriptor and closes it.
func OpenPidfd(pid int) (int, error) {
	fd, err := sys.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, fmt.Errorf("opening pidfd for pid %d: %w", pid, ErrProcessExited)
	}
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// AuthorityOf returns the positive authority over the process behind pidfd:
// the current boot ID and the pidfs device and inode of the descriptor. It
// refuses with ErrNoPidfs when the descriptor is not a pidfs inode.
func AuthorityOf(pidfd int) (PidfsProcessAuthorityV1, error) {
	var a PidfsProcessAuthorityV1
	var sfs unix.Statfs_t
	if err := sys.Fstatfs(pidfd, &sfs); err != nil {
		return a, fmt.Errorf("checking pidfd filesystem: %w", err)
	}
	switch uint64(sfs.Type) {
	case pidfsMagic:
	case anonInodeMagic:
		return a, ErrNoPidfs
	default:
		return a, fmt.Errorf("checking pidfd filesystem: magic %#x: %w", uint64(sfs.Type), ErrNoPidfs)
	}
	var st unix.Stat_t
	if err := sys.Fstat(pidfd, &st); err != nil {
		return a, fmt.Errorf("reading pidfs identity: %w", err)
	}
	boot, err := CurrentBootID()
	if err != nil {
		return a, err
	}
	a.BootID = boot
	a.PidfsDev = st.Dev
	a.PidfsInode = st.Ino
	return a, nil
}

// IdentityOf returns the pidfs identity of the live process behind pidfd.
//
// The host PID comes from the pidfd's fdinfo and the start time from
// /proc/<pid>/stat. Reading a PID-keyed file is racy on its own; it is made
// exact by checking, after the read, that the pidfd's process still exists
// (pidfd_send_signal with signal 0): a PID is not reused while its process
// exists, even as a zombie, so the stat line read belonged to that process.
// The PID is the one seen from the caller's PID namespace, which for
// Lazaret's host processes is the host PID namespace.
func IdentityOf(pidfd int) (PidfsProcessIdentityV1, error) {
	var id PidfsProcessIdentityV1
	a, err := AuthorityOf(pidfd)
	if err != nil {
		return id, err
	}
	pid, err := pidOf(pidfd)
	if err != nil {
		return id, err
	}
	start, err := StartTimeTicks(pid)
	if err != nil {
		return id, err
	}
	if err := sys.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return id, fmt.Errorf("confirming pid %d after reading its start time: %w", pid, ErrProcessExited)
		}
		return id, fmt.Errorf("confirming pid %d: %w", pid, err)
	}
	id.Authority = a
	id.HostPID = uint32(pid)
	id.StartTimeTicks = start
	return id, nil
}

// pidOf reads the "Pid:" line of the pidfd's fdinfo.
func pidOf(pidfd int) (int, error) {
	p := "/proc/self/fdinfo/" + strconv.Itoa(pidfd)
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("reading pidfd fdinfo: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "Pid:")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("parsing Pid line of %q: %w", p, err)
		}
		switch {
		case n == -1:
			return 0, ErrProcessExited
		case n == 0:
			return 0, ErrPidNamespace
		case n < 0 || n > 1<<22:
			return 0, fmt.Errorf("parsing Pid line of %q: pid %d out of range", p, n)
		}
		return n, nil
	}
	return 0, fmt.Errorf("reading %q: no Pid line (not a pidfd?)", p)
}

// StartTimeTicks reads field 22 (starttime, in clock ticks since boot) of
// /proc/<pid>/stat.
func StartTimeTicks(pid int) (uint64, error) {
	p := "/proc/" + strconv.Itoa(pid) + "/stat"
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("reading start time of pid %d: %w", pid, ErrProcessExited)
		}
		return 0, fmt.Errorf("reading start time: %w", err)
	}
	v, err := ParseStatStartTime(b)
	if err != nil {
		return 0, fmt.Errorf("parsing %q: %w", p, err)
	}
	return v, nil
}

// ParseStatStartTime extracts field 22 from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may itself contain spaces and
// parentheses, so fields are counted from the last ')' in the line.
func ParseStatStartTime(line []byte) (uint64, error) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 || bytes.IndexByte(line, '(') < 0 || bytes.IndexByte(line, '(') > end {
		return 0, errors.New("stat line has no parenthesised command name")
	}
	rest := strings.Fields(string(line[end+1:]))
	// rest[0] is field 3 (state), so field 22 is rest[19].
	const idx = 22 - 3
	if len(rest) <= idx {
		return 0, fmt.Errorf("stat line has %d fields after the command name, want at least %d", len(rest), idx+1)
	}
	v, err := strconv.ParseUint(rest[idx], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat field 22 (starttime): %w", err)
	}
	return v, nil
}

// PidfsRecoveryMatch decides whether pidfd refers to the recorded process.
// Only equality of the pidfs authority (boot ID, pidfs device and inode) is
// positive evidence. The host PID and start time can only refute: when the
// authority matches but either differs, the result is false with
// ErrIdentityContradicted. When the authority matches and the process has
// already been reaped, the negative evidence can no longer be read and the
// authority alone decides (true). A different authority is false with a nil
// error.
func PidfsRecoveryMatch(recorded PidfsProcessIdentityV1, pidfd int) (bool, error) {
	a, err := AuthorityOf(pidfd)
	if err != nil {
		return false, err
	}
	if a != recorded.Authority {
		return false, nil
	}
	pid, err := pidOf(pidfd)
	if errors.Is(err, ErrProcessExited) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if uint32(pid) != recorded.HostPID {
		return false, fmt.Errorf("recorded pid %d, pidfd pid %d: %w", recorded.HostPID, pid, ErrIdentityContradicted)
	}
	start, err := StartTimeTicks(pid)
	if errors.Is(err, ErrProcessExited) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if start != recorded.StartTimeTicks {
		return false, fmt.Errorf("recorded start time %d, pid %d start time %d: %w", recorded.StartTimeTicks, pid, start, ErrIdentityContradicted)
	}
	return true, nil
}

// namespaceKinds is the closed set of /proc/<pid>/ns entries.
var namespaceKinds = map[string]bool{
	"cgroup": true, "ipc": true, "mnt": true, "net": true, "pid": true,
	"time": true, "user": true, "uts": true,
}

// NamespaceOfProcess returns the nsfs identity of namespace kind ("user",
// "mnt", "net", ...) of process pid.
func NamespaceOfProcess(pid int, kind string) (NamespaceIdentity, error) {
	if !namespaceKinds[kind] {
		return NamespaceIdentity{}, fmt.Errorf("namespace kind %q: want one of cgroup, ipc, mnt, net, pid, time, user, uts", kind)
	}
	p := "/proc/" + strconv.Itoa(pid) + "/ns/" + kind
	fd, err := sys.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return NamespaceIdentity{}, err
	}
	defer unix.Close(fd)
	n, err := NamespaceOf(fd)
	if err != nil {
		return n, fmt.Errorf("namespace %q: %w", p, err)
	}
	return n, nil
}

// NamespaceOf returns the nsfs device and inode of a namespace descriptor.
func NamespaceOf(fd int) (NamespaceIdentity, error) {
	var sfs unix.Statfs_t
	if err := sys.Fstatfs(fd, &sfs); err != nil {
		return NamespaceIdentity{}, err
	}
	if uint64(sfs.Type) != nsfsMagic {
		return NamespaceIdentity{}, ErrNotNamespace
	}
	var st unix.Stat_t
	if err := sys.Fstat(fd, &st); err != nil {
		return NamespaceIdentity{}, err
	}
	return NamespaceIdentity{Device: st.Dev, Inode: st.Ino}, nil
}

// MountOf returns the identity of the object fd refers to: the ID of the
// mount it lives on, and its own device and inode. Passed a mount root it
// identifies that mount; passed a file (a socket, an identity file) it
// identifies that file on its mount.
//
// The mount ID is the 64-bit never-reused STATX_MNT_ID_UNIQUE where the
// kernel provides it (Linux 6.8 and later) and the legacy STATX_MNT_ID
// otherwise. One kernel always answers the same way, and mount identities
// never outlive a boot, so values compared within a boot are consistent.
func MountOf(fd int) (MountIdentity, error) {
	var stx unix.Statx_t
	mask := unix.STATX_INO | unix.STATX_MNT_ID | unix.STATX_MNT_ID_UNIQUE
	if err := sys.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, mask, &stx); err != nil {
		return MountIdentity{}, err
	}
	if stx.Mask&(unix.STATX_MNT_ID|unix.STATX_MNT_ID_UNIQUE) == 0 {
		return MountIdentity{}, ErrNoMountID
	}
	if stx.Mask&unix.STATX_INO == 0 {
		return MountIdentity{}, errors.New("statx returned no inode number")
	}
	return MountIdentity{
		MountID: stx.Mnt_id,
		Device:  unix.Mkdev(stx.Dev_major, stx.Dev_minor),
		Inode:   stx.Ino,
	}, nil
}
