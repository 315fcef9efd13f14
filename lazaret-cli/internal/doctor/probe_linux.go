package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ProbeKind names a probe that runs in a child process inside new
// namespaces, where the doctor itself (a multithreaded Go process) cannot
// go.
type ProbeKind string

// The namespace probes.
const (
	// ProbeUserNS starts a child in a new user namespace that maps the
	// caller to root.
	ProbeUserNS ProbeKind = "userns"
	// ProbeOverlay mounts an overlay filesystem in new user and mount
	// namespaces.
	ProbeOverlay ProbeKind = "overlay"
	// ProbeNftables creates an nftables table with a forward filter chain
	// and a masquerading NAT chain in new user and network namespaces.
	ProbeNftables ProbeKind = "nftables"
)

// ErrInitialNamespace means a probe was started in the host's own user
// namespace, where it would change the host instead of a throw-away
// namespace.
var ErrInitialNamespace = errors.New("refusing to run in the initial user namespace; probes run only in namespaces the doctor creates")

// InitialUIDMap reports whether the content of /proc/self/uid_map is the
// initial user namespace's identity map of every ID.
func InitialUIDMap(content string) bool {
	f := strings.Fields(content)
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// ErrUnknownProbe means a probe name is not one of the ProbeKinds.
var ErrUnknownProbe = errors.New("unknown probe")

// ParseProbeKind checks a probe name.
func ParseProbeKind(s string) (ProbeKind, error) {
	switch k := ProbeKind(s); k {
	case ProbeUserNS, ProbeOverlay, ProbeNftables:
		return k, nil
	}
	return "", fmt.Errorf("probe %q: %w; known probes are %s, %s and %s", s, ErrUnknownProbe, ProbeUserNS, ProbeOverlay, ProbeNftables)
}

// unshareArgs are the namespace options of unshare(1) for the probe.
func (k ProbeKind) unshareArgs() []string {
	switch k {
	case ProbeOverlay:
		return []string{"--user", "--map-root-user", "--mount"}
	case ProbeNftables:
		return []string{"--user", "--map-root-user", "--net"}
	}
	return []string{"--user", "--map-root-user"}
}

// UnsharePath is util-linux's unshare(1), which the probes start through.
// Like nsenter for the coordinator it is named by path; PATH is never
// searched.
const UnsharePath = "/usr/bin/unshare"

// probeTimeout bounds one probe child.
const probeTimeout = 20 * time.Second

// ProbeError is a probe child's own report of what failed.
type ProbeError struct {
	Kind    ProbeKind
	Message string
}

func (e *ProbeError) Error() string { return e.Message }

// ChildProber runs probes by starting exe with args followed by the probe
// name, in the probe's namespaces, with the caller mapped to root. The
// child must run RunProbe for that name (lazaret-cli does, as the hidden
// command `doctor probe NAME`) and report a failure on stderr with a
// nonzero exit status.
//
// The namespaces are made by unshare(1) rather than by the doctor itself:
// a Lazaret process is not dumpable (PR_SET_DUMPABLE=0), so the
// /proc/PID/uid_map of a child it forks belongs to root and the doctor
// could not write it; unshare is dumpable and writes its own map before it
// executes the probe. The child gets no environment but PATH.
func ChildProber(exe string, args []string) func(context.Context, ProbeKind) error {
	return func(ctx context.Context, kind ProbeKind) error {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		argv := append(kind.unshareArgs(), "--", exe)
		argv = append(append(argv, args...), string(kind))
		cmd := exec.CommandContext(ctx, UnsharePath, argv...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(stderr.String())
			if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
				msg = msg[i+1:]
			}
			if msg == "" {
				msg = fmt.Sprintf("%s %s: %v", UnsharePath, strings.Join(argv, " "), err)
			}
			return &ProbeError{Kind: kind, Message: msg}
		}
		return nil
	}
}

// RunProbe runs one probe in the calling process, which must already be
// inside the probe's namespaces as root of its user namespace.
func RunProbe(kind ProbeKind) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s probe: running as uid %d, not as root of a user namespace", kind, os.Geteuid())
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return fmt.Errorf("%s probe: %w", kind, err)
	}
	if InitialUIDMap(string(m)) {
		return fmt.Errorf("%s probe: %w", kind, ErrInitialNamespace)
	}
	switch kind {
	case ProbeUserNS:
		return nil
	case ProbeOverlay:
		return probeOverlay()
	case ProbeNftables:
		return probeNftables()
	}
	return fmt.Errorf("probe %q: %w", kind, ErrUnknownProbe)
}

// probeOverlay mounts a tmpfs on a fresh temporary directory (in the
// probe's own mount namespace), an overlay of two directories inside it,
// and reads and writes through the overlay.
func probeOverlay() (err error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the probe's mounts private: %w", os.NewSyscallError("mount", err))
	}
	dir, err := os.MkdirTemp("", "lazaret-doctor-")
	if err != nil {
		return fmt.Errorf("overlay probe directory: %w", err)
	}
	defer func() {
		if rerr := os.Remove(dir); err == nil && rerr != nil {
			err = fmt.Errorf("removing overlay probe directory: %w", rerr)
		}
	}()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fmt.Errorf("mounting tmpfs on %q: %w", dir, os.NewSyscallError("mount", err))
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	sub := func(n string) string { return filepath.Join(dir, n) }
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(sub(d), 0o700); err != nil {
			return fmt.Errorf("overlay probe: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(sub("lower"), "probe"), []byte("lower"), 0o600); err != nil {
		return fmt.Errorf("overlay probe: %w", err)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", sub("lower"), sub("upper"), sub("work"))
	if err := unix.Mount("overlay", sub("merged"), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting overlay on %q: %w", sub("merged"), os.NewSyscallError("mount", err))
	}
	defer unix.Unmount(sub("merged"), unix.MNT_DETACH)
	b, err := os.ReadFile(filepath.Join(sub("merged"), "probe"))
	if err != nil || string(b) != "lower" {
		return fmt.Errorf("reading the lower layer through the overlay: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(sub("merged"), "probe"), []byte("upper"), 0o600); err != nil {
		return fmt.Errorf("writing through the overlay: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(sub("upper"), "probe")); err != nil || string(b) != "upper" {
		return fmt.Errorf("overlay copy-up: upper layer holds %q, %v", b, err)
	}
	return nil
}

// probeTable is the table the nftables probe creates in its own network
// namespace.
const probeTable = "lazaret_doctor"

// probeNftables creates, reads back and deletes a table with a forward
// filter chain and a NAT chain holding a masquerade rule: the kinds of
// objects the network sidecar installs.
func probeNftables() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("opening nftables netlink: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: probeTable})
	c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	nat := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: []expr.Any{&expr.Masq{}}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("creating nftables table %s with filter and NAT chains: %w", probeTable, err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("listing nftables tables: %w", err)
	}
	found := false
	for _, tt := range tables {
		found = found || tt.Name == probeTable
	}
	if !found {
		return fmt.Errorf("nftables table %s is missing after it was created", probeTable)
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("deleting nftables table %s: %w", probeTable, err)
	}
	return nil
}
