package doctor

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/locate"
)

// Environment variables that choose runsc and its platform
// (docs/RUNSC.md).
const (
	EnvRunsc         = "LAZARET_RUNSC"
	EnvRunscPlatform = "LAZARET_RUNSC_PLATFORM"
)

// Options say where to look and what to probe.
type Options struct {
	RuntimeRoot, StorageRoot string
	UID, GID                 int
	// LookupEnv reads the environment (LAZARET_RUNSC,
	// LAZARET_RUNSC_PLATFORM).
	LookupEnv func(string) (string, bool)
	// Finder locates runsc in the helper directory.
	Finder *locate.Finder
	// Probe runs a namespace probe in a child process (ChildProber).
	Probe func(context.Context, ProbeKind) error
	// ProbeRunsc runs a throw-away sandbox with `runsc do /bin/true`.
	ProbeRunsc bool
}

// Run checks the host and scans for leftovers. It returns an error only
// when the leftover scan cannot list the roots; every failed check is a
// Check with status Fail.
func Run(ctx context.Context, o Options) (*Report, error) {
	r := &Report{RuntimeRoot: o.RuntimeRoot, StorageRoot: o.StorageRoot}
	r.Checks = HostChecks(ctx, o)
	left, err := ScanLeftovers(o.RuntimeRoot, o.StorageRoot, uint32(o.UID))
	if err != nil {
		return nil, err
	}
	r.Leftovers = left
	r.Finish()
	return r, nil
}

// HostChecks runs every host check in a fixed order.
func HostChecks(ctx context.Context, o Options) []Check {
	var cs []Check
	var uts unix.Utsname
	release := "unknown"
	if err := unix.Uname(&uts); err == nil {
		release = unix.ByteSliceToString(uts.Release[:])
	}
	cs = append(cs, CheckKernel(release))

	sysctls := map[string]string{}
	for _, name := range []string{SysctlUnprivilegedClone, SysctlMaxUserNS, SysctlAppArmorUserNS} {
		if b, err := os.ReadFile(SysctlPath(name)); err == nil {
			sysctls[name] = strings.TrimSpace(string(b))
		}
	}
	cs = append(cs, CheckUserNamespaceSysctls(sysctls))
	usernsErr := o.Probe(ctx, ProbeUserNS)
	cs = append(cs, CheckUserNamespace(usernsErr))
	var overlayErr, nftErr error
	if usernsErr == nil {
		overlayErr = o.Probe(ctx, ProbeOverlay)
		nftErr = o.Probe(ctx, ProbeNftables)
	}
	cs = append(cs, CheckOverlay(usernsErr, overlayErr))
	cs = append(cs, CheckOpenat2(fsroot.Probe()))
	cs = append(cs, CheckPidfs(probePidfs()))
	cs = append(cs, CheckMountID(probeMountID()))

	facts := inspectRunsc(ctx, o)
	cs = append(cs, CheckRunsc(facts, PinnedRunscVersion)...)
	if o.ProbeRunsc && facts.LocateErr == nil {
		platform, err := runscPlatform(o.LookupEnv)
		if err != nil {
			cs = append(cs, Check{Name: "runsc platform", Status: Fail, Summary: err.Error(),
				Fix: "unset " + EnvRunscPlatform + " or set it to systrap, ptrace or kvm"})
		} else {
			cs = append(cs, CheckRunscPlatform(platform, probeRunscDo(ctx, facts.Path, platform, o.UID)))
		}
	}

	cs = append(cs, CheckIDMap(idMapHost(o.UID, o.GID)))
	cs = append(cs, CheckDevice("/dev/fuse", "the /workspace view", openDevice("/dev/fuse")))
	fuserm := Fail
	if o.UID == 0 {
		fuserm = Warn
	}
	cs = append(cs, lookCommand("fusermount3", "mounts and unmounts the /workspace view without root", "fuse3", fuserm))
	watches, werr := os.ReadFile(SysctlPath(SysctlInotifyWatches))
	cs = append(cs, CheckWorkspaceView(string(watches), werr))
	cs = append(cs, CheckDevice("/dev/net/tun", "slirp4netns's tap device", openDevice("/dev/net/tun")))
	cs = append(cs, CheckNftables(usernsErr, nftErr))
	cs = append(cs, lookCommand("slirp4netns", "the sandbox's connection to the network", "slirp4netns", Fail))
	cs = append(cs, lookCommand("git", "workspace resolution and the /workspace view", "git", Fail))

	var f FileFacts
	err := lstatFacts(o.RuntimeRoot, &f)
	cs = append(cs, CheckRuntimeRoot(o.RuntimeRoot, f, o.UID, err))
	f = FileFacts{}
	err = lstatFacts(o.StorageRoot, &f)
	cs = append(cs, CheckStorageRoot(o.StorageRoot, f, o.UID, err))
	cs = append(cs, CheckAuditSpace(o.StorageRoot))
	return cs
}

func lookCommand(name, purpose, pkg string, ifMissing Status) Check {
	p, err := exec.LookPath(name)
	return CheckCommand(name, p, purpose, pkg, ifMissing, err)
}

func lstatFacts(path string, f *FileFacts) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	f.Mode = fi.Mode()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		f.UID = st.Uid
	}
	return nil
}

func openDevice(path string) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return unix.Close(fd)
}

func probePidfs() error {
	fd, err := hostid.OpenPidfd(os.Getpid())
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = hostid.AuthorityOf(fd)
	return err
}

func probeMountID() error {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open", err)
	}
	defer unix.Close(fd)
	_, err = hostid.MountOf(fd)
	return err
}

// idMapHost reads what anchor.HostIDMap reads, for uid and gid.
func idMapHost(uid, gid int) anchor.IDMapHost {
	h := anchor.IDMapHost{UID: uint32(uid), GID: uint32(gid)}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		h.UserName = u.Username
	}
	exe := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
	}
	h.Helpers = exe(anchor.NewUIDMapPath) && exe(anchor.NewGIDMapPath)
	h.SubUID, _ = os.ReadFile(anchor.SubUIDPath)
	h.SubGID, _ = os.ReadFile(anchor.SubGIDPath)
	return h
}

// LocateRunsc returns the runsc Lazaret runs: $LAZARET_RUNSC when set (an
// absolute path to an executable regular file), else runsc in the helper
// directory. PATH is never searched.
func LocateRunsc(lookup func(string) (string, bool), finder *locate.Finder) (string, error) {
	if p, ok := lookup(EnvRunsc); ok {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("$%s is %q, which is not an absolute path", EnvRunsc, p)
		}
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("$%s names %q: %w", EnvRunsc, p, err)
		}
		if !st.Mode().IsRegular() || unix.Access(p, unix.X_OK) != nil {
			return "", fmt.Errorf("$%s names %q, which is not an executable regular file", EnvRunsc, p)
		}
		return filepath.Clean(p), nil
	}
	if finder == nil {
		return "", fmt.Errorf("finding helper runsc: %w", locate.ErrNotFound)
	}
	return finder.Find("runsc")
}

func runscPlatform(lookup func(string) (string, bool)) (string, error) {
	v, _ := lookup(EnvRunscPlatform)
	switch v {
	case "":
		return "systrap", nil
	case "systrap", "ptrace", "kvm":
		return v, nil
	}
	return "", fmt.Errorf("$%s is %q; allowed values are systrap, ptrace and kvm", EnvRunscPlatform, v)
}

// runscEnv is the only environment runsc gets from the doctor, as from
// the coordinator: no GVISOR_* variable passes through.
var runscEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}

func inspectRunsc(ctx context.Context, o Options) RunscFacts {
	var f RunscFacts
	f.Path, f.LocateErr = LocateRunsc(o.LookupEnv, o.Finder)
	if f.LocateErr != nil {
		return f
	}
	f.Static, f.ELFErr = StaticELF(f.Path)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.Path, "--version")
	cmd.Env = runscEnv
	out, err := cmd.Output()
	if err != nil {
		f.VersionErr = err
		return f
	}
	f.VersionLine, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	return f
}

// StaticELF reports whether the ELF file at path is statically linked: no
// program interpreter and no needed shared library.
func StaticELF(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return false, fmt.Errorf("reading needed libraries of %q: %w", path, err)
	}
	return len(libs) == 0, nil
}

// probeRunscDo runs /bin/true in a throw-away sandbox with its own state
// directory, removed afterwards.
func probeRunscDo(ctx context.Context, runsc, platform string, uid int) error {
	root, err := os.MkdirTemp("", "lazaret-doctor-runsc-")
	if err != nil {
		return fmt.Errorf("runsc probe state directory: %w", err)
	}
	defer os.RemoveAll(root)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := []string{"--root=" + root, "--network=none", "--ignore-cgroups", "--platform=" + platform}
	if uid != 0 {
		args = append(args, "--rootless")
	}
	args = append(args, "do", "/bin/true")
	cmd := exec.CommandContext(ctx, runsc, args...)
	cmd.Env = runscEnv
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg != "" {
			return fmt.Errorf("runsc %s: %w: %s", strings.Join(args, " "), err, msg)
		}
		return fmt.Errorf("runsc %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// ScanLeftovers reads the Domains under the roots, the mount table and
// the process list, and returns what FindLeftovers finds in them for uid.
func ScanLeftovers(runtimeRoot, storageRoot string, uid uint32) ([]Leftover, error) {
	in := LeftoverInput{RuntimeRoot: runtimeRoot, StorageRoot: storageRoot, UID: uid}
	domains, err := session.Status(runtimeRoot, storageRoot)
	if err != nil {
		return nil, fmt.Errorf("scanning for leftovers: %w", err)
	}
	for _, d := range domains {
		f := DomainFacts{Status: d}
		id, err := parseDomainID(d.DomainID)
		if err != nil {
			return nil, fmt.Errorf("scanning for leftovers: Domain %q: %w", d.DomainID, err)
		}
		p := control.DomainPaths(runtimeRoot, id)
		f.IdentityPath, f.SocketPath = p.Identity, p.Socket
		_, err = os.Lstat(p.Identity)
		f.IdentityExists = err == nil
		_, err = os.Lstat(p.Socket)
		f.SocketExists = err == nil
		in.Domains = append(in.Domains, f)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("scanning for leftovers: %w", err)
	}
	if in.Mounts, err = ParseMountinfo(string(mi)); err != nil {
		return nil, fmt.Errorf("scanning for leftovers: /proc/self/mountinfo: %w", err)
	}
	in.Processes = scanProcesses()
	return FindLeftovers(in), nil
}

// scanProcesses lists the processes whose executable, status and command
// line are readable; processes that exit during the scan are skipped.
func scanProcesses() []Process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		exe, err := os.Readlink(filepath.Join(dir, "exe"))
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			continue
		}
		ppid, uid, err := ParseStatus(string(st))
		if err != nil {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		out = append(out, Process{PID: pid, PPID: ppid, UID: uid, Exe: strings.TrimSuffix(exe, " (deleted)"), Cmdline: ParseCmdline(cl)})
	}
	return out
}

func parseDomainID(s string) (ids.DomainID, error) {
	var id ids.DomainID
	err := ids.ParseHex(id[:], s, "Domain ID")
	return id, err
}
