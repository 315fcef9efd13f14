package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/hostid"
)

// PinnedRunscVersion is the gVisor version Lazaret pins: GVISOR_VERSION of
// scripts/build-runsc. A test keeps the two equal; a packager's build may
// override it with -ldflags '-X lazaret.dev/lazaret-cli/internal/doctor.PinnedRunscVersion=...'.
var PinnedRunscVersion = "v0.0.0-20260905035102-160fafc42237"

// Minimum kernel: pidfds backed by pidfs inodes, the process identity every
// recorded runtime process carries, arrived in Linux 6.9.
const (
	minKernelMajor = 6
	minKernelMinor = 9
)

// ErrKernelRelease means a kernel release string does not begin with
// MAJOR.MINOR.
var ErrKernelRelease = errors.New("kernel release does not begin with MAJOR.MINOR")

// ParseKernelRelease returns the major and minor version of a release
// string as uname(2) reports it ("6.18.44-fc-v1045").
func ParseKernelRelease(release string) (major, minor int, err error) {
	majText, rest, ok := strings.Cut(release, ".")
	if !ok {
		return 0, 0, fmt.Errorf("kernel release %q: %w", release, ErrKernelRelease)
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	major, err1 := strconv.Atoi(majText)
	minor, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("kernel release %q: %w", release, ErrKernelRelease)
	}
	return major, minor, nil
}

// CheckKernel checks the running kernel's release against the minimum.
func CheckKernel(release string) Check {
	c := Check{Name: "kernel"}
	major, minor, err := ParseKernelRelease(release)
	if err != nil {
		c.Status, c.Summary = Warn, fmt.Sprintf("cannot read the version of kernel %q; the feature checks below decide", release)
		c.Fix = fmt.Sprintf("make sure the kernel is Linux %d.%d or later", minKernelMajor, minKernelMinor)
		return c
	}
	if major < minKernelMajor || (major == minKernelMajor && minor < minKernelMinor) {
		c.Status = Fail
		c.Summary = fmt.Sprintf("Linux %s is older than %d.%d, which Lazaret needs for pidfs process identities", release, minKernelMajor, minKernelMinor)
		c.Fix = fmt.Sprintf("boot a Linux %d.%d or later kernel", minKernelMajor, minKernelMinor)
		return c
	}
	c.Summary = fmt.Sprintf("Linux %s (%d.%d or later needed)", release, minKernelMajor, minKernelMinor)
	return c
}

// Sysctls that decide whether unprivileged user namespaces are allowed.
const (
	SysctlUnprivilegedClone = "kernel.unprivileged_userns_clone"
	SysctlMaxUserNS         = "user.max_user_namespaces"
	SysctlAppArmorUserNS    = "kernel.apparmor_restrict_unprivileged_userns"
)

// SysctlPath returns the /proc/sys file of a dotted sysctl name.
func SysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// CheckUserNamespaceSysctls checks the sysctls that can forbid user
// namespaces. values maps a sysctl name to its trimmed value; a missing
// name means the kernel has no such sysctl, which allows namespaces.
func CheckUserNamespaceSysctls(values map[string]string) Check {
	c := Check{Name: "user namespace sysctls"}
	var found []string
	if v, ok := values[SysctlUnprivilegedClone]; ok {
		found = append(found, SysctlUnprivilegedClone+"="+v)
		if v == "0" {
			c.Status = Fail
			c.Summary = SysctlUnprivilegedClone + " is 0: unprivileged users cannot create user namespaces"
			c.Fix = "sudo sysctl -w " + SysctlUnprivilegedClone + "=1 (and set it in /etc/sysctl.d to keep it)"
			return c
		}
	}
	if v, ok := values[SysctlMaxUserNS]; ok {
		found = append(found, SysctlMaxUserNS+"="+v)
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			c.Status, c.Summary = Warn, fmt.Sprintf("%s is %q, which is not a number", SysctlMaxUserNS, v)
			c.Fix = "sudo sysctl -w " + SysctlMaxUserNS + "=15000"
			return c
		}
		if n == 0 {
			c.Status = Fail
			c.Summary = SysctlMaxUserNS + " is 0: no user namespace can be created"
			c.Fix = "sudo sysctl -w " + SysctlMaxUserNS + "=15000 (and set it in /etc/sysctl.d to keep it)"
			return c
		}
	}
	if v, ok := values[SysctlAppArmorUserNS]; ok {
		found = append(found, SysctlAppArmorUserNS+"="+v)
		if v == "1" {
			c.Status = Warn
			c.Summary = SysctlAppArmorUserNS + " is 1: AppArmor may strip capabilities from user namespaces of unconfined programs"
			c.Fix = "if the user namespace check fails, allow userns for the Lazaret binaries in an AppArmor profile or set " + SysctlAppArmorUserNS + "=0"
			return c
		}
	}
	if len(found) == 0 {
		c.Summary = "no sysctl restricts user namespaces"
	} else {
		c.Summary = strings.Join(found, ", ") + " allow user namespaces"
	}
	return c
}

// CheckUserNamespace reports the attempt to start a process in a new user
// namespace mapped to the caller (err nil when it worked).
func CheckUserNamespace(err error) Check {
	c := Check{Name: "user namespaces"}
	if err != nil {
		c.Status = Fail
		c.Summary = fmt.Sprintf("creating a user namespace failed: %v", err)
		c.Fix = "allow unprivileged user namespaces: " + SysctlUnprivilegedClone + "=1 where that sysctl exists, " +
			SysctlMaxUserNS + " well above the number in use, no AppArmor or seccomp policy that forbids them, and util-linux's " + "unshare at /usr/bin/unshare"
		return c
	}
	c.Summary = "this user can create a user namespace"
	return c
}

// probeCheck reports a probe that runs inside a user namespace; usernsErr
// is the user namespace check's error, which makes the probe moot.
func probeCheck(name, okSummary, failSummary, fix string, usernsErr, err error) Check {
	c := Check{Name: name}
	switch {
	case usernsErr != nil:
		c.Status = Fail
		c.Summary = "not checked: it needs a user namespace, and none can be created"
		c.Fix = "fix the user namespace check first"
	case err != nil:
		c.Status = Fail
		c.Summary = fmt.Sprintf("%s: %v", failSummary, err)
		c.Fix = fix
	default:
		c.Summary = okSummary
	}
	return c
}

// CheckOverlay reports the overlay mount probe run in a user and mount
// namespace.
func CheckOverlay(usernsErr, err error) Check {
	return probeCheck("overlayfs in a user namespace",
		"an overlay filesystem can be mounted inside a user namespace",
		"mounting an overlay filesystem inside a user namespace failed",
		"use a kernel with overlayfs built in or loaded (modprobe overlay); Linux 5.11 or later allows it in user namespaces",
		usernsErr, err)
}

// CheckNftables reports the nftables probe: creating a table in a fresh
// user and network namespace through netlink.
func CheckNftables(usernsErr, err error) Check {
	return probeCheck("nftables",
		"the kernel accepts an nftables table in a fresh network namespace (the nft command is not needed)",
		"creating an nftables table in a fresh network namespace failed",
		"use a kernel with nf_tables (CONFIG_NF_TABLES, CONFIG_NFT_NAT, CONFIG_NFT_MASQ) built in or loaded: modprobe nf_tables",
		usernsErr, err)
}

// CheckOpenat2 reports whether openat2(2) is available.
func CheckOpenat2(err error) Check {
	c := Check{Name: "openat2"}
	if err != nil {
		c.Status = Fail
		c.Summary = fmt.Sprintf("openat2 with RESOLVE_NO_SYMLINKS failed: %v", err)
		c.Fix = "use Linux 5.6 or later without a seccomp policy that blocks openat2"
		return c
	}
	c.Summary = "openat2 resolves paths with RESOLVE_* restrictions"
	return c
}

// CheckPidfs reports whether a pidfd of this process has a pidfs identity.
func CheckPidfs(err error) Check {
	c := Check{Name: "pidfd and pidfs"}
	if err != nil {
		c.Status = Fail
		c.Summary = fmt.Sprintf("no pidfs process identity: %v", err)
		c.Fix = "use Linux 6.9 or later, where pidfds are pidfs inodes"
		if !errors.Is(err, hostid.ErrNoPidfs) {
			c.Fix = "use Linux 6.9 or later and allow pidfd_open (no seccomp policy that blocks it)"
		}
		return c
	}
	c.Summary = "pidfds carry a pidfs device and inode identity"
	return c
}

// CheckMountID reports whether statx returns mount IDs.
func CheckMountID(err error) Check {
	c := Check{Name: "statx mount ID"}
	if err != nil {
		c.Status = Fail
		c.Summary = fmt.Sprintf("statx gives no mount ID: %v", err)
		c.Fix = "use Linux 5.8 or later (STATX_MNT_ID)"
		return c
	}
	c.Summary = "statx reports STATX_MNT_ID"
	return c
}

// RunscFacts is what the doctor learned about the runsc Lazaret would run.
type RunscFacts struct {
	// Path is the runsc found; empty with LocateErr set when none was.
	Path      string
	LocateErr error
	// Static is true when the ELF file has no interpreter and no needed
	// shared library; ELFErr is set when the file could not be read as
	// ELF.
	Static bool
	ELFErr error
	// VersionLine is the first line of `runsc --version`; VersionErr is
	// set when it could not be run.
	VersionLine string
	VersionErr  error
}

// CheckRunsc checks the runsc binary: found, static, and the pinned
// version.
func CheckRunsc(f RunscFacts, pinned string) []Check {
	found := Check{Name: "runsc"}
	if f.LocateErr != nil {
		found.Status, found.Summary = Fail, fmt.Sprintf("no runsc: %v", f.LocateErr)
		found.Fix = "build and install the pinned runsc (`make runsc`, `make install`), or set $LAZARET_RUNSC to an absolute path"
		return []Check{found}
	}
	found.Summary = "using " + f.Path
	static := Check{Name: "runsc static"}
	switch {
	case f.ELFErr != nil:
		static.Status, static.Summary = Fail, fmt.Sprintf("%s is not a readable ELF executable: %v", f.Path, f.ELFErr)
		static.Fix = "rebuild it with scripts/build-runsc"
	case !f.Static:
		static.Status, static.Summary = Fail, f.Path+" is dynamically linked; it fails at sandbox start with a misleading ENOENT"
		static.Fix = "rebuild it with CGO_ENABLED=0 (scripts/build-runsc does)"
	default:
		static.Summary = f.Path + " is statically linked"
	}
	version := Check{Name: "runsc version"}
	want := "runsc version " + pinned
	switch {
	case f.VersionErr != nil:
		version.Status, version.Summary = Fail, fmt.Sprintf("`%s --version` failed: %v", f.Path, f.VersionErr)
		version.Fix = "rebuild it with scripts/build-runsc"
	case f.VersionLine == want:
		version.Summary = fmt.Sprintf("%q, the pinned version", f.VersionLine)
	default:
		version.Status = Warn
		version.Summary = fmt.Sprintf("%q, not the pinned %q", f.VersionLine, want)
		version.Fix = "Lazaret is tested with the pinned version: run `make runsc` and `make install`, or make sure a packaged runsc supports netstack inside a network namespace"
	}
	return []Check{found, static, version}
}

// CheckRunscPlatform reports the quick sandbox probe on platform.
func CheckRunscPlatform(platform string, err error) Check {
	c := Check{Name: "runsc platform " + platform}
	if err != nil {
		c.Status = Fail
		c.Summary = fmt.Sprintf("runsc could not run /bin/true on %s: %v", platform, err)
		c.Fix = "set LAZARET_RUNSC_PLATFORM=ptrace if systrap cannot run on this host, and check the runsc checks above"
		return c
	}
	c.Summary = "runsc ran /bin/true in a sandbox on " + platform
	return c
}

// CheckIDMap reports the user-namespace ID map Lazaret will use for the
// State Anchor, from the same inputs anchor.HostIDMap reads.
func CheckIDMap(h anchor.IDMapHost) Check {
	c := Check{Name: "subordinate IDs"}
	m, err := anchor.ChooseIDMap(h)
	if err != nil {
		c.Status, c.Summary = Fail, fmt.Sprintf("choosing the ID map: %v", err)
		c.Fix = "correct the malformed line in " + anchor.SubUIDPath + " or " + anchor.SubGIDPath
		return c
	}
	if h.UID == 0 {
		c.Summary = "running as root: IDs 0 to 65535 map to themselves (" + m.String() + ")"
		return c
	}
	if len(m.UIDs) > 1 {
		c.Summary = "subordinate ranges and newuidmap/newgidmap give the map " + m.String()
		return c
	}
	name := h.UserName
	if name == "" {
		name = strconv.FormatUint(uint64(h.UID), 10)
	}
	var why []string
	if !h.Helpers {
		why = append(why, anchor.NewUIDMapPath+" or "+anchor.NewGIDMapPath+" is missing")
	}
	if !hasSubordinate(h.SubUID, h.UserName, h.UID) {
		why = append(why, "no range for "+name+" in "+anchor.SubUIDPath)
	}
	if !hasSubordinate(h.SubGID, h.UserName, h.UID) {
		why = append(why, "no range for "+name+" in "+anchor.SubGIDPath)
	}
	c.Status = Warn
	c.Summary = "a single-ID map is used (" + m.String() + "): " + strings.Join(why, "; ") + "; files of other owners in an image all belong to one ID"
	c.Fix = fmt.Sprintf("install the uidmap package and run `sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s`", name)
	return c
}

// hasSubordinate reports whether a subordinate ID file has a line for the
// user (by name or decimal UID). Malformed lines are anchor.ChooseIDMap's
// to report.
func hasSubordinate(content []byte, user string, uid uint32) bool {
	for _, line := range strings.Split(string(content), "\n") {
		owner, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && owner != "" && (owner == user || owner == strconv.FormatUint(uint64(uid), 10)) {
			return true
		}
	}
	return false
}

// CheckDevice reports whether a device node opened for reading and
// writing (err nil when it did).
func CheckDevice(path, purpose string, err error) Check {
	c := Check{Name: path}
	if err != nil {
		c.Status = Fail
		c.Summary = fmt.Sprintf("cannot open %s for reading and writing (%s needs it): %v", path, purpose, err)
		c.Fix = "make it 0666 as distributions do: sudo chmod 0666 " + path
		if errors.Is(err, fs.ErrNotExist) {
			c.Fix = "load the kernel module that provides it and create the node (modprobe; mknod)"
		}
		return c
	}
	c.Summary = fmt.Sprintf("readable and writable (%s)", purpose)
	return c
}

// CheckCommand reports a host command found on PATH (err nil) or not;
// missing gives status ifMissing.
func CheckCommand(name, path, purpose, pkg string, ifMissing Status, err error) Check {
	c := Check{Name: name}
	if err != nil {
		c.Status = ifMissing
		c.Summary = fmt.Sprintf("%s not found on PATH (%s)", name, purpose)
		c.Fix = "install the " + pkg + " package"
		return c
	}
	c.Summary = fmt.Sprintf("%s (%s)", path, purpose)
	return c
}

// FileFacts is what Lstat says about a directory Lazaret owns.
type FileFacts struct {
	Mode fs.FileMode
	UID  uint32
}

// CheckRuntimeRoot checks the runtime root: absent (created on first
// start), or a real directory owned by uid with mode 0700. err is the
// Lstat error.
func CheckRuntimeRoot(path string, f FileFacts, uid int, err error) Check {
	c := Check{Name: "runtime root"}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Summary = path + " does not exist yet; the first start creates it with mode 0700"
		return c
	case err != nil:
		c.Status, c.Summary = Fail, fmt.Sprintf("cannot inspect %s: %v", path, err)
		c.Fix = "make " + path + " a directory of yours with mode 0700"
		return c
	}
	if msg, fix := ownedDir(path, f, uid); msg != "" {
		c.Status, c.Summary, c.Fix = Fail, msg, fix
		return c
	}
	if f.Mode.Perm()&0o077 != 0 {
		c.Status = Fail
		c.Summary = fmt.Sprintf("%s has mode %04o; it holds sockets and keys and must be private", path, f.Mode.Perm())
		c.Fix = "chmod 0700 " + shellQuote(path)
		return c
	}
	c.Summary = path + " is a private directory (0700) of this user"
	return c
}

// CheckStorageRoot checks the storage root: absent (created on first
// use), or a real directory owned by uid that no group or other user can
// write.
func CheckStorageRoot(path string, f FileFacts, uid int, err error) Check {
	c := Check{Name: "storage root"}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Summary = path + " does not exist yet; the first use creates it"
		return c
	case err != nil:
		c.Status, c.Summary = Fail, fmt.Sprintf("cannot inspect %s: %v", path, err)
		c.Fix = "make " + path + " a directory of yours"
		return c
	}
	if msg, fix := ownedDir(path, f, uid); msg != "" {
		c.Status, c.Summary, c.Fix = Fail, msg, fix
		return c
	}
	if f.Mode.Perm()&0o022 != 0 {
		c.Status = Fail
		c.Summary = fmt.Sprintf("%s has mode %04o; another user could replace the stores and images in it", path, f.Mode.Perm())
		c.Fix = "chmod go-w " + shellQuote(path)
		return c
	}
	c.Summary = fmt.Sprintf("%s is a directory of this user (mode %04o)", path, f.Mode.Perm())
	return c
}

func ownedDir(path string, f FileFacts, uid int) (msg, fix string) {
	switch {
	case f.Mode&fs.ModeSymlink != 0:
		return path + " is a symbolic link", "replace it with a real directory (or point the variable that names it at the link's target)"
	case !f.Mode.IsDir():
		return path + " is not a directory", "move the file away: mv " + shellQuote(path) + " " + shellQuote(path+".old")
	case int(f.UID) != uid:
		return fmt.Sprintf("%s is owned by uid %d, not by this user (uid %d)", path, f.UID, uid), "use a directory of your own, or sudo chown " + strconv.Itoa(uid) + " " + shellQuote(path)
	}
	return "", ""
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// characters that are safe unquoted.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:=@%,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SysctlInotifyWatches is the per-user limit on inotify watches; the
// workspace view watches every directory of the workspace it shows.
const SysctlInotifyWatches = "fs.inotify.max_user_watches"

// minInotifyWatches is the limit under which the doctor warns: one
// Domain's view needs one watch per shown directory of its workspace, and
// a directory without a watch falls back to the view's short cache
// timeouts (docs/WORKSPACE.md, "Caching").
const minInotifyWatches = 65536

// CheckWorkspaceView reports how the /workspace view keeps its caches
// true and how file data reaches the sandbox. value is the content of
// fs.inotify.max_user_watches (err set when it could not be read).
func CheckWorkspaceView(value string, err error) Check {
	c := Check{Name: "workspace view caching"}
	const data = "file data crosses the view's daemon on first read, then comes from the kernel's page cache " +
		"(no FUSE passthrough: it needs CAP_SYS_ADMIN in the initial user namespace, which the daemon never holds)"
	if err != nil {
		c.Status = Warn
		c.Summary = fmt.Sprintf("cannot read %s: %v; the view may fall back to short cache timeouts; %s", SysctlInotifyWatches, err, data)
		c.Fix = "make /proc/sys/fs/inotify/max_user_watches readable (mount /proc)"
		return c
	}
	n, perr := strconv.ParseUint(strings.TrimSpace(value), 10, 64)
	if perr != nil {
		c.Status = Warn
		c.Summary = fmt.Sprintf("%s is %q, not a number; %s", SysctlInotifyWatches, strings.TrimSpace(value), data)
		c.Fix = fmt.Sprintf("sudo sysctl %s=%d", SysctlInotifyWatches, 4*minInotifyWatches)
		return c
	}
	if n < minInotifyWatches {
		c.Status = Warn
		c.Summary = fmt.Sprintf("%s=%d allows few watches: directories of a large workspace beyond it see host edits only after the view's short timeouts; %s",
			SysctlInotifyWatches, n, data)
		c.Fix = fmt.Sprintf("sudo sysctl %s=%d (and in /etc/sysctl.d to keep it)", SysctlInotifyWatches, 4*minInotifyWatches)
		return c
	}
	c.Summary = fmt.Sprintf("host edits reach the sandbox through inotify (%s=%d); %s", SysctlInotifyWatches, n, data)
	return c
}
