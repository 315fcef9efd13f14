package bundle

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"lazaret.dev/pkg/layout"
)

// ErrInvalid is wrapped by every planning error.
var ErrInvalid = errors.New("invalid sandbox plan")

// ImageConfig is the part of an OCI image configuration the sandbox uses.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
}

// User is the sandbox user, already resolved against the image's
// /etc/passwd and /etc/group (see ResolveUser).
type User struct {
	UID            uint32
	GID            uint32
	AdditionalGIDs []uint32
	Home           string
}

// Volume is one configured volume, with its source already opened and
// checked by the configuration's ConfinedPathPlan.
type Volume struct {
	Source      string // host path of the verified source
	Destination string // sandbox path
	ReadOnly    bool
}

// Input is everything the container plan depends on.
type Input struct {
	Layout      *layout.SandboxLayoutV1
	RootfsPath  string // the State Anchor's merged root
	Hostname    string
	Image       ImageConfig
	User        User
	Workspace   string // host source of /workspace
	ControlDir  string // host source of /run/lazaret
	EtcDir      string // host dir holding resolv.conf, hosts, hostname
	Volumes     []Volume
	InitArgv    []string // the container's own process, e.g. the guest's init
	NetworkPath string   // network namespace path; empty means no network
	// TrustStores are sandbox paths (members of TrustStores) to
	// mount EtcDir/ca-certificates.crt over, read-only: the image's CA
	// bundle with the credential broker's CA appended. Empty without a
	// credential broker.
	TrustStores []string
	// WorkspaceDentries is the size of gVisor's dentry cache for the
	// /workspace mount (its `dcache` mount option); 0 keeps gVisor's
	// default of 1000. See docs/RUNSC.md, "The workspace mount".
	WorkspaceDentries int
}

// MaxWorkspaceDentries bounds WorkspaceDentries: each cached dentry keeps
// one host file descriptor open in the sandbox.
const MaxWorkspaceDentries = 1 << 20

// defaultPath is used when the image sets no PATH.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Container returns the runtime spec of the sandbox container.
func Container(in Input) (*specs.Spec, error) {
	if in.Layout == nil || !in.Layout.Valid() {
		return nil, fmt.Errorf("%w: no sandbox layout", ErrInvalid)
	}
	for name, p := range map[string]string{
		"rootfs": in.RootfsPath, "workspace": in.Workspace,
		"control directory": in.ControlDir, "etc directory": in.EtcDir,
	} {
		if !path.IsAbs(p) || path.Clean(p) != p {
			return nil, fmt.Errorf("%w: %s path %q must be absolute and clean", ErrInvalid, name, p)
		}
	}
	if in.WorkspaceDentries < 0 || in.WorkspaceDentries > MaxWorkspaceDentries {
		return nil, fmt.Errorf("%w: workspace dentry cache %d is outside 0..%d", ErrInvalid, in.WorkspaceDentries, MaxWorkspaceDentries)
	}
	if len(in.InitArgv) == 0 || !path.IsAbs(in.InitArgv[0]) {
		return nil, fmt.Errorf("%w: init argv %q must start with an absolute path", ErrInvalid, in.InitArgv)
	}
	if in.Hostname == "" {
		return nil, fmt.Errorf("%w: empty hostname", ErrInvalid)
	}

	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}},
		workspaceBind(in.Workspace, in.WorkspaceDentries),
		bind(in.ControlDir, layout.Control, false),
		bind(path.Join(in.EtcDir, "resolv.conf"), "/etc/resolv.conf", true),
		bind(path.Join(in.EtcDir, "hosts"), "/etc/hosts", true),
		bind(path.Join(in.EtcDir, "hostname"), "/etc/hostname", true),
	}
	volumeDests := map[string]bool{}
	for i, v := range in.Volumes {
		if !path.IsAbs(v.Source) || path.Clean(v.Source) != v.Source {
			return nil, fmt.Errorf("%w: volumes[%d] source %q must be absolute and clean", ErrInvalid, i, v.Source)
		}
		if dest, clash := in.Layout.Conflicts(v.Destination); clash {
			return nil, fmt.Errorf("%w: volumes[%d] destination %q overlaps protected %q", ErrInvalid, i, v.Destination, dest)
		}
		volumeDests[v.Destination] = true
		mounts = append(mounts, bind(v.Source, v.Destination, v.ReadOnly))
	}
	// The trust stores are mounted only where no volume is: a volume
	// over /etc/ssl brings its own bundle (and the session environment
	// still names the broker's CA, see the coordinator).
	trust := map[string]bool{}
	for _, t := range in.TrustStores {
		if !slices.Contains(TrustStores, t) {
			return nil, fmt.Errorf("%w: trust store %q is not one of %q", ErrInvalid, t, TrustStores)
		}
		if slices.ContainsFunc(in.Volumes, func(v Volume) bool { return layout.Overlaps(v.Destination, t) }) {
			continue
		}
		trust[t] = true
		mounts = append(mounts, bind(path.Join(in.EtcDir, TrustBundleName), t, true))
	}
	protected := in.Layout.Protected()
	for _, m := range mounts {
		if !slices.Contains(protected, m.Destination) && !volumeDests[m.Destination] && !trust[m.Destination] {
			return nil, fmt.Errorf("%w: mount destination %q is neither protected nor a volume", ErrInvalid, m.Destination)
		}
	}

	namespaces := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
		{Type: specs.NetworkNamespace, Path: in.NetworkPath},
	}
	spec := &specs.Spec{
		Version:  specs.Version,
		Hostname: in.Hostname,
		Root:     &specs.Root{Path: in.RootfsPath},
		Process: &specs.Process{
			Args:            slices.Clone(in.InitArgv),
			Env:             mergeEnv(in.Image.Env, nil),
			Cwd:             "/",
			User:            specUser(in.User),
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{},
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			Namespaces: namespaces,
			// gVisor implements these; they keep the sandbox's own view
			// of the kernel interfaces read-only or hidden.
			MaskedPaths:   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"},
		},
	}
	return spec, nil
}

// SessionInput describes one session process.
type SessionInput struct {
	Image    ImageConfig
	User     User
	Argv     []string // empty: the image's entrypoint and command, else /bin/sh
	Env      []string // NAME=VALUE pairs from the profile's env: references and Lazaret's own
	Terminal bool
	Rows     uint16
	Columns  uint16
}

// Session returns the process spec of a session started by `runsc exec`.
// Its environment holds resolved secrets: it is passed to runsc through a
// sealed memfd and never written to a file.
func Session(in SessionInput) (*specs.Process, error) {
	argv := DefaultArgv(in.Image, in.Argv)
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("%w: argv[%d] contains NUL", ErrInvalid, i)
		}
	}
	for i, kv := range in.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			// Only the name is reported: the value may be a secret.
			return nil, fmt.Errorf("%w: env[%d] (%q) is not NAME=VALUE without NUL", ErrInvalid, i, name)
		}
	}
	cwd := in.Image.WorkingDir
	if cwd == "" {
		cwd = layout.Workspace
	}
	p := &specs.Process{
		Terminal:        in.Terminal,
		Args:            argv,
		Env:             mergeEnv(in.Image.Env, in.Env),
		Cwd:             cwd,
		User:            specUser(in.User),
		NoNewPrivileges: true,
		Capabilities:    &specs.LinuxCapabilities{},
	}
	if in.Terminal && in.Rows > 0 && in.Columns > 0 {
		p.ConsoleSize = &specs.Box{Height: uint(in.Rows), Width: uint(in.Columns)}
	}
	if in.User.Home != "" && !hasEnv(p.Env, "HOME") {
		p.Env = append(p.Env, "HOME="+in.User.Home)
	}
	return p, nil
}

// DefaultArgv is argv when given, else the image's entrypoint followed by
// its command, else /bin/sh.
func DefaultArgv(img ImageConfig, argv []string) []string {
	if len(argv) > 0 {
		return slices.Clone(argv)
	}
	if d := append(slices.Clone(img.Entrypoint), img.Cmd...); len(d) > 0 {
		return d
	}
	return []string{"/bin/sh"}
}

func bind(src, dst string, ro bool) specs.Mount {
	opts := []string{"rbind", "nosuid", "nodev"}
	if ro {
		opts = append(opts, "ro")
	} else {
		opts = append(opts, "rw")
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts}
}

// workspaceBind is the /workspace bind. gVisor opens a host descriptor for
// every file it keeps a dentry of, and its per-mount cache holds 1000 by
// default: a git status over a larger tree evicts and reopens each file on
// every run, which through the view costs the daemon several requests per
// file. dentries > 0 sizes that cache.
func workspaceBind(src string, dentries int) specs.Mount {
	m := bind(src, layout.Workspace, false)
	if dentries > 0 {
		m.Options = append(m.Options, "dcache="+strconv.Itoa(dentries))
	}
	return m
}

func specUser(u User) specs.User {
	return specs.User{UID: u.UID, GID: u.GID, AdditionalGids: slices.Clone(u.AdditionalGIDs)}
}

// mergeEnv overlays extra on base by name, keeping first-seen order, and
// supplies a PATH when neither sets one.
func mergeEnv(base, extra []string) []string {
	var out []string
	index := map[string]int{}
	for _, list := range [][]string{base, extra} {
		for _, kv := range list {
			name, _, _ := strings.Cut(kv, "=")
			if i, ok := index[name]; ok {
				out[i] = kv
				continue
			}
			index[name] = len(out)
			out = append(out, kv)
		}
	}
	if _, ok := index["PATH"]; !ok {
		out = append(out, defaultPath)
	}
	return out
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}
