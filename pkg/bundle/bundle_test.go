package bundle

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/layout"
)

func baseInput() Input {
	return Input{
		Layout:     layout.Production(),
		RootfsPath: "/run/user/1000/lazaret/g/rootfs",
		Hostname:   "lazaret",
		Image:      ImageConfig{Env: []string{"PATH=/bin", "LANG=C"}},
		User:       User{UID: 1000, GID: 1000},
		Workspace:  "/home/dev/project",
		ControlDir: "/run/user/1000/lazaret/g/control",
		EtcDir:     "/run/user/1000/lazaret/g/etc",
		InitArgv:   []string{"/run/lazaret/lazaret-guest", "init"},
	}
}

func TestContainerPlan(t *testing.T) {
	in := baseInput()
	in.Volumes = []Volume{{Source: "/home/dev/data", Destination: "/home/agent/data", ReadOnly: true}}
	spec, err := Container(in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Root.Path != in.RootfsPath || !spec.Process.NoNewPrivileges {
		t.Errorf("root %q, noNewPrivileges %v", spec.Root.Path, spec.Process.NoNewPrivileges)
	}
	c := spec.Process.Capabilities
	if len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("capabilities granted: %+v", c)
	}
	byDest := map[string]bool{}
	for _, m := range spec.Mounts {
		byDest[m.Destination] = true
		if m.Destination == "/home/agent/data" && !slices.Contains(m.Options, "ro") {
			t.Errorf("read-only volume mounted %v", m.Options)
		}
		if m.Destination == layout.Workspace && m.Source != in.Workspace {
			t.Errorf("workspace source %q", m.Source)
		}
	}
	for _, d := range layout.Production().Protected() {
		if !byDest[d] {
			t.Errorf("protected destination %s not mounted by the product", d)
		}
	}
	var netns bool
	for _, ns := range spec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path == "" {
			netns = true
		}
	}
	if !netns {
		t.Error("no private network namespace without a network path")
	}
}

func TestContainerRefuses(t *testing.T) {
	cases := map[string]func(*Input){
		"no layout":         func(in *Input) { in.Layout = nil },
		"zero layout":       func(in *Input) { in.Layout = &layout.SandboxLayoutV1{} },
		"relative rootfs":   func(in *Input) { in.RootfsPath = "rootfs" },
		"unclean workspace": func(in *Input) { in.Workspace = "/home/dev/../dev/project" },
		"relative init":     func(in *Input) { in.InitArgv = []string{"init"} },
		"no init":           func(in *Input) { in.InitArgv = nil },
		"volume on workspace": func(in *Input) {
			in.Volumes = []Volume{{Source: "/data", Destination: "/workspace/x"}}
		},
		"volume over proc": func(in *Input) {
			in.Volumes = []Volume{{Source: "/data", Destination: "/proc"}}
		},
		"negative dentry cache": func(in *Input) { in.WorkspaceDentries = -1 },
		"huge dentry cache":     func(in *Input) { in.WorkspaceDentries = MaxWorkspaceDentries + 1 },
		"relative volume source": func(in *Input) {
			in.Volumes = []Volume{{Source: "data", Destination: "/home/agent/data"}}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			in := baseInput()
			mutate(&in)
			if _, err := Container(in); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Container error = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestWorkspaceDentryCache(t *testing.T) {
	for _, tt := range []struct {
		dentries int
		want     string // the dcache option, "" for none
	}{{0, ""}, {1, "dcache=1"}, {15000, "dcache=15000"}, {MaxWorkspaceDentries, "dcache=1048576"}} {
		in := baseInput()
		in.WorkspaceDentries = tt.dentries
		spec, err := Container(in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range spec.Mounts {
			for _, o := range m.Options {
				if strings.HasPrefix(o, "dcache=") {
					if m.Destination != layout.Workspace {
						t.Errorf("%d: %s on %s", tt.dentries, o, m.Destination)
					}
					got = append(got, o)
				}
			}
		}
		if tt.want == "" && len(got) != 0 || tt.want != "" && !slices.Equal(got, []string{tt.want}) {
			t.Errorf("%d dentries: options %q, want %q", tt.dentries, got, tt.want)
		}
	}
}

func TestContainerKeepsSecretsOut(t *testing.T) {
	in := baseInput()
	spec, err := Container(in)
	if err != nil {
		t.Fatal(err)
	}
	// The container process only ever gets the image environment.
	if !slices.Equal(spec.Process.Env, []string{"PATH=/bin", "LANG=C"}) {
		t.Errorf("container env = %q", spec.Process.Env)
	}
}

func TestSessionPlan(t *testing.T) {
	img := ImageConfig{Entrypoint: []string{"/usr/bin/agent"}, Cmd: []string{"--fast"}, Env: []string{"PATH=/usr/bin", "MODE=a"}, WorkingDir: "/srv"}
	p, err := Session(SessionInput{Image: img, User: User{UID: 1, Home: "/home/a"}, Env: []string{"MODE=b", "TOKEN=s3cret"}, Terminal: true, Rows: 24, Columns: 80})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Args, []string{"/usr/bin/agent", "--fast"}) || p.Cwd != "/srv" {
		t.Errorf("args %q cwd %q", p.Args, p.Cwd)
	}
	if !slices.Equal(p.Env, []string{"PATH=/usr/bin", "MODE=b", "TOKEN=s3cret", "HOME=/home/a"}) {
		t.Errorf("env %q", p.Env)
	}
	if p.ConsoleSize == nil || p.ConsoleSize.Height != 24 || p.ConsoleSize.Width != 80 {
		t.Errorf("console size %+v", p.ConsoleSize)
	}
	p, err = Session(SessionInput{Argv: []string{"/bin/echo", "hi"}})
	if err != nil || p.Cwd != layout.Workspace || !slices.Contains(p.Env, defaultPath) {
		t.Errorf("defaults: %+v, %v", p, err)
	}
	if got := DefaultArgv(ImageConfig{}, nil); !slices.Equal(got, []string{"/bin/sh"}) {
		t.Errorf("DefaultArgv = %q", got)
	}
}

// TestSessionWorkingDir: a session starts in the image's WorkingDir when
// it sets one, and in /workspace otherwise, never in /.
func TestSessionWorkingDir(t *testing.T) {
	for _, tc := range []struct{ name, image, want string }{
		{"unset", "", "/workspace"},
		{"workspace", "/workspace", "/workspace"},
		{"explicit root", "/", "/"},
		{"explicit other", "/srv/app", "/srv/app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Session(SessionInput{Image: ImageConfig{WorkingDir: tc.image}, Argv: []string{"/bin/sh"}})
			if err != nil {
				t.Fatal(err)
			}
			if p.Cwd != tc.want {
				t.Errorf("cwd = %q, want %q", p.Cwd, tc.want)
			}
		})
	}
	if layout.Workspace != "/workspace" {
		t.Errorf("layout.Workspace = %q", layout.Workspace)
	}
}

func TestSessionErrorNeverShowsValues(t *testing.T) {
	_, err := Session(SessionInput{Env: []string{"TOKEN=s3c\x00ret"}})
	if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "s3c") {
		t.Fatalf("error = %v", err)
	}
}

func TestResolveUser(t *testing.T) {
	passwd := "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000::/home/agent:/bin/sh\n# comment\nbroken:line\n"
	group := "root:x:0:\nagent:x:1000:\ndocker:x:999:agent,other\nwheel:x:10:agent\n"
	cases := []struct {
		spec    string
		want    User
		wantErr bool
	}{
		{"", User{UID: 0, GID: 0, Home: "/root"}, false},
		{"agent", User{UID: 1000, GID: 1000, Home: "/home/agent", AdditionalGIDs: []uint32{999, 10}}, false},
		{"1000", User{UID: 1000, GID: 1000, Home: "/home/agent", AdditionalGIDs: []uint32{999, 10}}, false},
		{"agent:docker", User{UID: 1000, GID: 999, Home: "/home/agent", AdditionalGIDs: []uint32{10}}, false},
		{"4242", User{UID: 4242, GID: 0, Home: "/"}, false},
		{"4242:7", User{UID: 4242, GID: 7, Home: "/"}, false},
		{"nobody", User{}, true},
		{"agent:nogroup", User{}, true},
		{":docker", User{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := resolveUser(tc.spec, passwd, group)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || got.UID != tc.want.UID || got.GID != tc.want.GID || got.Home != tc.want.Home || !slices.Equal(got.AdditionalGIDs, tc.want.AdditionalGIDs) {
				t.Fatalf("resolveUser(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
			}
		})
	}
}

// A symlinked /etc/passwd in the image must resolve inside the root, never
// to the host's file.
func TestResolveUserStaysInRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "inner-passwd"), []byte("inner:x:7:7::/in:/bin/sh\n"), 0o644)
	// Absolute link target: resolved against the image root, not the host.
	if err := os.Symlink("/inner-passwd", filepath.Join(root, "etc", "passwd")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	u, err := ResolveUser(fd, "inner")
	if err != nil || u.UID != 7 {
		t.Fatalf("ResolveUser = %+v, %v", u, err)
	}
	if _, err := ResolveUser(fd, "root"); err == nil {
		t.Fatal("resolved root from the host's /etc/passwd through a symlink")
	}
}
