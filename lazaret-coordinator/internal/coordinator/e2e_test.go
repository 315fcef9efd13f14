package coordinator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/conform"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/image/build"
	imgstore "lazaret.dev/pkg/image/store"
	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/nftplan"
	"lazaret.dev/pkg/paths"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/startup"
	"lazaret.dev/pkg/testgate"
	"lazaret.dev/pkg/trace"
)

const (
	testImage     = "localhost/lazaret-coordinator-test:1"
	testProfile   = "e2e"
	secretHostVar = "LZ_E2E_SECRET_SOURCE"
)

// repoRoot is the repository root (three levels above this package).
func repoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// findRunsc returns $LAZARET_RUNSC or <repo>/bin/runsc.
func findRunsc(t testing.TB) string {
	var p string
	testgate.Require(t, "runsc ($LAZARET_RUNSC or bin/runsc from `make runsc`)", func() error {
		if v := os.Getenv(EnvRunsc); v != "" {
			p = v
		} else {
			p = filepath.Join(repoRoot(t), "bin", "runsc")
		}
		_, err := os.Stat(p)
		return err
	})
	return p
}

// buildHelpers builds the Lazaret binaries the coordinator runs into one
// directory (static, as released), once per test process tree: the
// directory is exported as $LAZARET_LIBEXEC_DIR, which the test binaries
// re-executed in a lab inherit and use. A $LAZARET_LIBEXEC_DIR set from
// outside names prebuilt binaries instead (a run as another user without a
// Go toolchain of its own).
func buildHelpers(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("LAZARET_LIBEXEC_DIR"); d != "" {
		return d
	}
	builtHelpers.once.Do(func() {
		dir, err := os.MkdirTemp("", "lazaret-helpers-")
		if err != nil {
			builtHelpers.err = err
			return
		}
		builtHelpers.dir = dir
		root := repoRoot(t)
		for _, m := range []string{"lazaret-coordinator", "lazaret-anchor", "lazaret-supervisor", "lazaret-guest", "lazaret-gitroute", "lazaret-netsidecar"} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, m), ".")
			cmd.Dir = filepath.Join(root, m)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				builtHelpers.err = fmt.Errorf("building %s: %v\n%s", m, err, out)
				return
			}
		}
		// The helpers must be reachable by the unprivileged IDs of the
		// State Anchor's user namespace too.
		if err := os.Chmod(dir, 0o755); err != nil {
			builtHelpers.err = err
		}
	})
	if builtHelpers.err != nil {
		t.Fatal(builtHelpers.err)
	}
	os.Setenv("LAZARET_LIBEXEC_DIR", builtHelpers.dir)
	return builtHelpers.dir
}

// builtHelpers is what buildHelpers built in this process.
var builtHelpers struct {
	once sync.Once
	dir  string
	err  error
}

// TestMain removes the helpers this process built.
func TestMain(m *testing.M) {
	code := m.Run()
	if builtHelpers.dir != "" {
		os.RemoveAll(builtHelpers.dir)
	}
	os.Exit(code)
}

// busyboxImage stores a busybox image (Debian's busybox-static) in the
// image store of storage.
func busyboxImage(t testing.TB, storage string) {
	t.Helper()
	bb := testgate.Command(t, "busybox")
	out, err := exec.Command("readelf", "-l", bb).CombinedOutput()
	if err == nil && bytes.Contains(out, []byte("program interpreter")) {
		testgate.Require(t, "a static busybox (apt-get install busybox-static)", func() error { return fmt.Errorf("%s is dynamically linked", bb) })
	}
	tree := t.TempDir()
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "root", "tmp", "home/agent", "workspace"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(tree, "tmp"), 0o1777)
	installBusybox(t, bb, tree)
	os.WriteFile(filepath.Join(tree, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "etc/group"), []byte("root:x:0:\n"), 0o644)
	storeTreeImage(t, tree, storage, testImage)
}

// installBusybox copies the busybox bb to tree/bin/busybox and links
// every applet to it.
func installBusybox(t testing.TB, bb, tree string) {
	t.Helper()
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "bin/busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "bin/busybox" {
			continue
		}
		os.Remove(filepath.Join(tree, applet))
		if err := os.Symlink("/bin/busybox", filepath.Join(tree, applet)); err != nil {
			t.Fatal(err)
		}
	}
}

// storeTreeImage stores the directory tree as the one-layer image ref,
// running /bin/sh, in the image store of storage.
func storeTreeImage(t testing.TB, tree, storage, ref string) {
	t.Helper()
	layer, err := build.Layer(tree, build.Options{Time: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{layer}, build.Config{Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := imgstore.Open(filepath.Join(storage, "images"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), ref, img, nil); err != nil {
		t.Fatal(err)
	}
}

// env is one end-to-end environment: a storage root, a runtime root, a
// workspace and a configuration.
type env struct {
	bin, runsc         string
	storage, xdgRun    string
	workspace, cfgFile string
	secret             string
	traces             string // $LAZARET_TRACE_DIR of the test's coordinators
	environ            []string
	domain             ids.DomainID
	fingerprint        string
	paths              control.Paths
}

func newEnv(t *testing.T) *env {
	e := &env{runsc: findRunsc(t)}
	testgate.Command(t, "git")
	testgate.Command(t, "nsenter")
	e.bin = buildHelpers(t)
	base := t.TempDir()
	os.Chmod(base, 0o700)
	e.storage = filepath.Join(base, "storage")
	e.xdgRun = filepath.Join(base, "run")
	e.workspace = filepath.Join(base, "ws")
	for _, d := range []string{e.storage, e.xdgRun, e.workspace} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "init", "-q", e.workspace).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	busyboxImage(t, e.storage)
	e.traces = filepath.Join(base, "trace")
	if err := os.Mkdir(e.traces, 0o700); err != nil {
		t.Fatal(err)
	}
	// Registered first, so run last: after every coordinator of the test
	// has been stopped, its protocol trace must be a behaviour of the
	// model.
	t.Cleanup(func() { e.checkTraces(t) })
	e.secret = "s3cr3t-" + hex.EncodeToString(randBytes(12))
	e.cfgFile = filepath.Join(base, "config.toml")
	cfg := fmt.Sprintf(`schema = "lazaret-trusted-host-config-v1"
[storage]
data_root = %q
[network]
default_allow = []
default_deny = []
[profiles.%s]
image = %q
persistent_dirs = ["/home/agent"]
allow_egress = ["198.51.100.0/24", "198.51.100.70/32"]
deny_egress = ["198.51.100.64/26"]
[profiles.%s.env]
E2E_SECRET = "env:%s"
[profiles.%s.readiness]
denied = [{ address = "198.19.0.1", port = 443 }]
permitted = [{ address = "198.51.100.1", port = 443 }]
dns = [{ resolver = "198.51.100.53", query = "example.com" }]
`, e.storage, testProfile, testImage, testProfile, secretHostVar, testProfile)
	if err := os.WriteFile(e.cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.environ = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + base,
		"XDG_RUNTIME_DIR=" + e.xdgRun,
		"XDG_DATA_HOME=" + filepath.Join(base, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(base, "config"),
		"LAZARET_LIBEXEC_DIR=" + e.bin,
		EnvRunsc + "=" + e.runsc,
		secretHostVar + "=" + e.secret,
		trace.EnvDir + "=" + e.traces,
	}
	if v := os.Getenv(EnvRunscPlatform); v != "" {
		e.environ = append(e.environ, EnvRunscPlatform+"="+v)
	}
	e.resolve(t)
	return e
}

// checkTraces validates the protocol traces the test's coordinators
// recorded against the model.
func (e *env) checkTraces(t *testing.T) {
	reps, err := conform.ValidateDir(e.traces)
	if err != nil {
		t.Errorf("protocol trace: %v", err)
		return
	}
	for _, r := range reps {
		t.Logf("protocol trace: %d events, %d sessions, %d requests, %d model steps in %d projections: valid",
			r.Events, r.Sessions, r.Requests, r.Steps, r.Projections)
	}
}

// resolve resolves the configuration file as the CLI does and sets the
// Domain, its fingerprint and its control paths; the workspace becomes its
// canonical form.
func (e *env) resolve(t *testing.T) {
	t.Helper()
	lookup := func(k string) (string, bool) {
		for _, kv := range e.environ {
			if name, v, _ := strings.Cut(kv, "="); name == k {
				return v, true
			}
		}
		return "", false
	}
	ws, err := paths.Workspace(e.workspace)
	if err != nil {
		t.Fatal(err)
	}
	e.workspace = ws
	rc, err := config.ResolveFile(config.Options{
		Profile: testProfile, Workspace: ws, Layout: layout.Production(),
		Environment: paths.Environment{LookupEnv: lookup, UID: os.Getuid()}, File: e.cfgFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	fp := rc.Fingerprint()
	e.fingerprint = hex.EncodeToString(fp[:])
	e.domain = rc.DomainID()
	if err := paths.EnsureRuntimeRoot(rc.RuntimeRoot(), os.Getuid()); err != nil {
		t.Fatal(err)
	}
	e.paths = control.DomainPaths(rc.RuntimeRoot(), e.domain)
	rc.Close()
	if err := os.MkdirAll(e.paths.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// hc is a running coordinator.
type hc struct {
	cmd    *exec.Cmd
	lock   *os.File
	report []string
	ready  time.Duration
	done   chan struct{} // closed when the process has been waited for
	err    error
}

// spawn starts `lazaret-coordinator serve` as the CLI does: the Domain
// lock flocked and passed as fd 3, the start report pipe as fd 4, output
// appended to coordinator.log. It returns the lock (the caller closes its
// copy once the coordinator holds it) and the report's read end.
func (e *env) spawn(t *testing.T, linger time.Duration) (*exec.Cmd, *os.File, *os.File) {
	t.Helper()
	lock, err := os.OpenFile(filepath.Join(e.paths.Dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("domain lock busy: %v", err)
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(e.paths.Dir, "coordinator.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	serve := startup.Serve{ConfigFile: e.cfgFile, Profile: testProfile, Workspace: e.workspace,
		Fingerprint: e.fingerprint, Linger: linger, Lock: lock, Report: rw}
	args, err := serve.Argv()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(e.bin, "lazaret-coordinator"), args...)
	cmd.Env = e.environ
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.ExtraFiles, err = serve.ExtraFiles(); err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	logf.Close()
	return cmd, lock, rr
}

// start spawns `lazaret-coordinator serve` as the CLI does and waits for
// its start report.
func (e *env) start(t *testing.T, linger time.Duration) *hc {
	t.Helper()
	t0 := time.Now()
	cmd, lock, rr := e.spawn(t, linger)
	h := &hc{cmd: cmd, lock: lock, done: make(chan struct{})}
	go func() { h.err = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-h.done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
			}
		}
	})
	sc := bufio.NewScanner(rr)
	for sc.Scan() {
		line := sc.Text()
		h.report = append(h.report, line)
		if line == "ready" {
			h.ready = time.Since(t0)
			break
		}
		if strings.HasPrefix(line, "error ") {
			t.Fatalf("coordinator start failed: %s\n%s", line, e.log(t))
		}
	}
	if h.ready == 0 {
		t.Fatalf("coordinator exited during start (report %q)\n%s", h.report, e.log(t))
	}
	rr.Close()
	// The CLI closes its copy after ready; the HC holds the lock now.
	lock.Close()
	return h
}

func (e *env) log(t *testing.T) string {
	b, _ := os.ReadFile(filepath.Join(e.paths.Dir, "coordinator.log"))
	return string(b)
}

// client dials, enrolls and returns a client and a fresh-session binder.
func (e *env) client(t *testing.T) (*control.Client, func() protocol.SessionBinding) {
	t.Helper()
	ctx := context.Background()
	c, err := control.Dial(ctx, e.paths.Socket, e.paths.Identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cred, err := c.Enroll(ctx, ids.CLIID(ids.New()))
	if err != nil {
		t.Fatal(err)
	}
	gen := c.Publication().GenerationIdentity
	return c, func() protocol.SessionBinding {
		k, err := protocol.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b := protocol.SessionBinding{GenerationIdentity: gen, CLIID: cred.CLIID(), SessionID: ids.SessionID(ids.New()), SessionAnchorPublicKey: k.Public()}
		if _, err := c.Register(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func execute(t *testing.T, c *control.Client, b protocol.SessionBinding, argv ...string) (string, string, protocol.SessionExit) {
	t.Helper()
	var out, errb bytes.Buffer
	exit, err := c.Execute(context.Background(), b.SessionID, argv, &out, &errb)
	if err != nil {
		t.Fatalf("execute %q: %v", argv, err)
	}
	return out.String(), errb.String(), exit
}

func code(x protocol.SessionExit) int {
	if x.Outcome != protocol.ExitExited || x.ExitCode == nil {
		return -1
	}
	return int(*x.ExitCode)
}

func TestServeEndToEnd(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	h := e.start(t, time.Second)
	t.Logf("start report %q, start to ready %v", h.report, h.ready)
	c, session := e.client(t)

	t.Run("execute", func(t *testing.T) {
		out, errs, x := execute(t, c, session(), "echo", "hi")
		if out != "hi\n" || errs != "" || code(x) != 0 {
			t.Fatalf("echo hi: stdout %q stderr %q exit %+v", out, errs, x)
		}
	})
	t.Run("failing command keeps streams apart", func(t *testing.T) {
		out, errs, x := execute(t, c, session(), "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
		if out != "out\n" || errs != "err\n" || code(x) != 3 {
			t.Fatalf("stdout %q stderr %q exit %+v", out, errs, x)
		}
	})
	t.Run("secret visible inside", func(t *testing.T) {
		out, _, x := execute(t, c, session(), "/bin/sh", "-c", "echo \"$E2E_SECRET\"")
		if out != e.secret+"\n" || code(x) != 0 {
			t.Fatalf("E2E_SECRET inside = %q, exit %+v", out, x)
		}
	})
	t.Run("persistent write", func(t *testing.T) {
		_, errs, x := execute(t, c, session(), "/bin/sh", "-c", "echo kept > /home/agent/keep")
		if code(x) != 0 {
			t.Fatalf("write: %q %+v", errs, x)
		}
	})
	t.Run("interactive", func(t *testing.T) {
		b := session()
		s, err := c.Interactive(context.Background(), protocol.InteractiveSessionRequest{
			SessionID: b.SessionID, Argv: []string{"/bin/sh"},
			InitialSize: protocol.TerminalResize{SessionID: b.SessionID, Rows: 24, Columns: 80},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Input([]byte("echo inter$((40+2))\n")); err != nil {
			t.Fatal(err)
		}
		var screen strings.Builder
		var exit *protocol.SessionExit
		sentExit := false
		deadline := time.Now().Add(30 * time.Second)
		for exit == nil && time.Now().Before(deadline) {
			batch, err := s.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("recv: %v (screen %q)", err, screen.String())
			}
			for _, m := range batch.Messages {
				if m.Terminal == nil {
					continue
				}
				if m.Terminal.Output != nil {
					screen.Write(m.Terminal.Output.Bytes)
				}
				if m.Terminal.Exit != nil {
					exit = m.Terminal.Exit
				}
			}
			if !sentExit && strings.Contains(screen.String(), "inter42") {
				sentExit = true
				if err := s.Input([]byte("exit 5\n")); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !strings.Contains(screen.String(), "inter42") {
			t.Fatalf("screen %q lacks the echo", screen.String())
		}
		if exit == nil || code(*exit) != 5 {
			t.Fatalf("interactive exit %+v (screen %q)", exit, screen.String())
		}
	})
	c.Close()

	waitExit(t, e, h)
	if os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(e.log(t))
	}
	checkNothingLeft(t, e)

	t.Run("second generation sees the persistent file", func(t *testing.T) {
		t0 := time.Now()
		h2 := e.start(t, 0)
		t.Logf("second start: report %q, start to ready %v (wall %v)", h2.report, h2.ready, time.Since(t0))
		c2, session2 := e.client(t)
		out, _, x := execute(t, c2, session2(), "cat", "/home/agent/keep")
		if out != "kept\n" || code(x) != 0 {
			t.Fatalf("cat keep: %q %+v", out, x)
		}
		c2.Close()
		waitExit(t, e, h2)
		checkNothingLeft(t, e)
	})
	t.Run("secret in no file", func(t *testing.T) {
		for _, root := range []string{e.storage, e.xdgRun} {
			filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
				if err != nil || !info.Mode().IsRegular() {
					return nil
				}
				b, err := os.ReadFile(p)
				if err == nil && bytes.Contains(b, []byte(e.secret)) {
					t.Errorf("secret found in %q", p)
				}
				return nil
			})
		}
	})
}

func waitExit(t *testing.T, e *env, h *hc) {
	t.Helper()
	t0 := time.Now()
	defer func() { t.Logf("coordinator exited %v after the last command", time.Since(t0)) }()
	select {
	case <-h.done:
		if h.err != nil {
			t.Fatalf("coordinator exited with %v\n%s", h.err, e.log(t))
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("coordinator did not linger out\n%s", e.log(t))
	}
}

// checkNothingLeft checks that no mount, process or lock of the test's
// generations remains.
func checkNothingLeft(t *testing.T, e *env) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{e.storage, e.xdgRun, e.workspace} {
		if bytes.Contains(mi, []byte(root)) {
			t.Errorf("host mount table still mentions %q", root)
		}
	}
	// fusermount3, started by the view daemon with auto_unmount, outlives
	// the daemon for the moment it takes to see the FUSE connection close,
	// try its unmount and exit (it then says "not mounted": the
	// coordinator unmounted first). A process left for good is a leak; one
	// still ending is not, so each gets a few seconds.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if bytes.Contains(b, []byte(e.xdgRun)) || bytes.Contains(b, []byte(e.storage)) {
				left = append(left, fmt.Sprintf("process %s still runs: %q", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, l := range left {
				t.Error(l)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	lock, err := os.OpenFile(filepath.Join(e.paths.Dir, "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Errorf("domain lock still held: %v", err)
	}
	unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	for _, p := range []string{e.paths.Socket, e.paths.Identity} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%q still exists", p)
		}
	}
	gens, _ := filepath.Glob(filepath.Join(e.paths.Dir, "gen-*"))
	if len(gens) != 0 {
		t.Errorf("generation directories left: %q", gens)
	}
	// Unix sockets still bound under the test's directories: listening
	// sockets of a process, a runsc gofer or sandbox, that outlived it.
	if b, err := os.ReadFile("/proc/net/unix"); err != nil {
		t.Errorf("reading /proc/net/unix: %v", err)
	} else {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, e.xdgRun) || strings.Contains(line, e.storage) {
				t.Errorf("unix socket still bound: %s", line)
			}
		}
	}
	// Namespaces live as long as a process or a mount holds them: the
	// scans above cover both (an nsfs bind mount shows in the mount
	// table). The nftables tables of the enforcement path live in the
	// sidecar's namespace; none may appear in this one.
	ns, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	switch tables, err := netpath.TableNames(ns); {
	case err != nil && os.Geteuid() != 0:
		t.Logf("nftables tables of this network namespace are not listable without CAP_NET_ADMIN: %v", err)
	case err != nil:
		t.Errorf("listing this network namespace's nftables tables: %v", err)
	default:
		for _, name := range tables {
			if strings.HasSuffix(name, " "+nftplan.TableName) {
				t.Errorf("nftables table %q left in the coordinator's network namespace", name)
			}
		}
	}
}
