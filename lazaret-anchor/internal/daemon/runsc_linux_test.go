package daemon

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/testgate"
)

// findRunsc returns $LAZARET_RUNSC, else the repository's bin/runsc built
// by `make runsc`.
func findRunsc(t *testing.T) string {
	t.Helper()
	var path string
	testgate.Require(t, "runsc (set LAZARET_RUNSC or run make runsc)", func() error {
		path = os.Getenv("LAZARET_RUNSC")
		if path == "" {
			p, err := filepath.Abs(filepath.Join("..", "..", "..", "bin", "runsc"))
			if err != nil {
				return err
			}
			path = p
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", path)
		}
		return nil
	})
	return path
}

// staticBusybox returns a statically linked busybox (Debian's
// busybox-static), which runs in a root filesystem without a libc.
func staticBusybox(t *testing.T) string {
	t.Helper()
	var path string
	testgate.Require(t, "static busybox (apt-get install busybox-static)", func() error {
		p, err := exec.LookPath("busybox")
		if err != nil {
			return err
		}
		f, err := elf.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				return fmt.Errorf("%s is dynamically linked", p)
			}
		}
		path = p
		return nil
	})
	return path
}

// busyboxLower fills l.lower with a minimal root filesystem.
func busyboxLower(t *testing.T, l layout, busybox string) {
	t.Helper()
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp", "data"} {
		if err := os.MkdirAll(filepath.Join(l.lower, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.lower, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "cat", "echo", "id"} {
		if err := os.Symlink("busybox", filepath.Join(l.lower, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
}

// runscRun runs one container with script in the anchor's namespaces and
// returns its stdout.
func runscRun(t *testing.T, a *anchor.Anchor, runsc string, l layout, id, script string) string {
	t.Helper()
	dir := t.TempDir()
	bundle, state := filepath.Join(dir, "bundle"), filepath.Join(dir, "state")
	if err := os.Mkdir(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"user": map[string]any{"uid": 0, "gid": 0},
			"args": []string{"/bin/sh", "-c", script},
			"env":  []string{"PATH=/bin"},
			"cwd":  "/", "noNewPrivileges": true,
		},
		"root":     map[string]any{"path": l.merged, "readonly": false},
		"hostname": "sandbox",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
		},
		"linux": map[string]any{"namespaces": []map[string]any{
			{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
		}},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// --overlay2=none: runsc's default keeps root filesystem writes in a
	// sandbox-private layer, so they would never reach the upper
	// directory.
	cmd, err := a.CommandInNamespaces(ctx, []string{runsc,
		"--root=" + state, "--ignore-cgroups", "--network=none", "--overlay2=none",
		"--host-uds=none", "--gofer-network-namespace=new",
		"run", "--bundle=" + bundle, id})
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("runsc run %s: %v (stderr %q)", id, err, stderr.String())
	}
	t.Logf("runsc run %s in the anchor's namespaces took %v", id, time.Since(start))
	return string(out)
}

func TestRunscRunsOverlayAndUpperPersists(t *testing.T) {
	requireAnchor(t)
	runsc := findRunsc(t)
	busybox := staticBusybox(t)
	l := newLayout(t)
	busyboxLower(t, l, busybox)
	m := hostMap(t)

	first := start(t, testSpec(t, l, m))
	out := runscRun(t, first, runsc, l, "gen1", "id -u; cat /etc/marker; echo from-sandbox > /data/file")
	if out != "0\nfrom lower\n" {
		t.Errorf("first sandbox printed %q", out)
	}
	b, err := os.ReadFile(filepath.Join(l.upper, "data", "file"))
	if err != nil || string(b) != "from-sandbox\n" {
		t.Fatalf("upper/data/file = %q, %v: the sandbox's write did not reach the upper directory", b, err)
	}
	if _, err := os.Stat(filepath.Join(l.lower, "data", "file")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox's write reached the lower directory: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := first.Release(ctx); err != nil {
		t.Fatalf("Release after runsc exited: %v", err)
	}
	if got := hostMounts(t, l.merged); len(got) != 0 {
		t.Fatalf("host mountinfo names the merged directory: %q", got)
	}

	second := start(t, testSpec(t, l, m))
	if out := runscRun(t, second, runsc, l, "gen2", "cat /data/file"); out != "from-sandbox\n" {
		t.Errorf("second generation's sandbox read %q", out)
	}
	if _, err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
