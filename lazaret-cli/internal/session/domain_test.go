package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/startup"
)

// The test binary doubles as a fake coordinator: with FAKE_COORDINATOR set
// it speaks the start report instead of running tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FAKE_COORDINATOR"); mode != "" {
		os.Exit(fakeCoordinator(mode))
	}
	os.Exit(m.Run())
}

// fakeCoordinator takes the serve hand-off as the coordinator does, checks
// that its lock descriptor holds the Domain lock, then reports by
// mode: "ready" publishes an identity file holding the fingerprint (or
// FAKE_FINGERPRINT) and keeps the lock for FAKE_HOLD; "error" reports an
// error line; "die" exits without a final line.
func fakeCoordinator(mode string) int {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintf(os.Stderr, "fake coordinator: command line %q is not serve\n", os.Args)
		return 2
	}
	serve, err := startup.ParseServe(os.Args[2:])
	if err == nil {
		err = serve.Inherit()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake coordinator: %v\n", err)
		return 2
	}
	lock, report := serve.Lock, serve.Report
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		fmt.Fprintf(report, "error the lock descriptor does not hold the Domain lock: %v\n", err)
		return 1
	}
	fp := serve.Fingerprint
	if v := os.Getenv("FAKE_FINGERPRINT"); v != "" {
		fp = v
	}
	fmt.Fprintln(report, "step prepare")
	switch mode {
	case "error":
		fmt.Fprintln(report, "error prepare: image localhost/x:1 is not in the local image store")
		return 1
	case "die":
		fmt.Fprintln(os.Stderr, "fake coordinator dying")
		return 2
	}
	identity := filepath.Join(os.Getenv("FAKE_DIR"), control.IdentityName)
	if err := os.WriteFile(identity, []byte(fp), 0o600); err != nil {
		fmt.Fprintf(report, "error publish: %v\n", err)
		return 1
	}
	fmt.Fprintln(report, "ready")
	report.Close()
	hold, _ := time.ParseDuration(os.Getenv("FAKE_HOLD"))
	time.Sleep(hold)
	os.Remove(identity)
	lock.Close()
	return 0
}

type fakeConn struct {
	pub protocol.ProtocolPublicationIdentity
}

func (f *fakeConn) Publication() protocol.ProtocolPublicationIdentity { return f.pub }
func (f *fakeConn) Close() error                                      { return nil }

type fixture struct {
	t      *testing.T
	target *Target
	spawns atomic.Int32
	live   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	fp := ids.Digest{1, 2, 3}
	return &fixture{t: t, target: &Target{
		ConfigFile: "/nonexistent/config.toml", Profile: "dev", Workspace: "/w",
		RuntimeRoot: root, StorageRoot: filepath.Join(root, "storage"),
		DomainID: ids.DomainID{9, 9}, Fingerprint: fp, Linger: time.Second,
	}}
}

// attacher spawns the test binary as the coordinator in mode, with extra
// environment.
func (f *fixture) attacher(mode string, env ...string) *Attacher[*fakeConn] {
	self, err := os.Executable()
	if err != nil {
		f.t.Fatal(err)
	}
	t := f.target
	return &Attacher[*fakeConn]{
		Coordinator: func() (string, error) { f.spawns.Add(1); return self, nil },
		Dial: func(ctx context.Context, p control.Paths) (*fakeConn, error) {
			b, err := os.ReadFile(p.Identity)
			if err != nil {
				return nil, err
			}
			var fp ids.Digest
			if err := ids.ParseHex(fp[:], string(b), "fingerprint"); err != nil {
				return nil, err
			}
			return &fakeConn{pub: protocol.ProtocolPublicationIdentity{GenerationIdentity: protocol.GenerationIdentity{
				AgentProfile: t.Profile, DomainID: t.DomainID, ConfigurationFingerprint: fp,
			}}}, nil
		},
		Live: func(*Target) (string, error) { return f.live, nil },
		Env:  append([]string{"FAKE_COORDINATOR=" + mode, "FAKE_DIR=" + t.Paths().Dir}, env...),
		Wait: 10 * time.Second,
		Poll: 10 * time.Millisecond,
	}
}

// lockHeld reports whether some other open file description holds the
// Domain lock.
func (f *fixture) lockHeld() bool {
	l, err := OpenLock(f.target.LockPath())
	if err != nil {
		f.t.Fatal(err)
	}
	defer l.Close()
	ok, err := l.TryLock()
	if err != nil {
		f.t.Fatal(err)
	}
	return !ok
}

func TestDecide(t *testing.T) {
	tests := []struct {
		lock, published bool
		want            action
	}{
		{true, false, actSpawn},
		{true, true, actLeftover},
		{false, true, actJoin},
		{false, false, actWait},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("lock=%v,published=%v", tt.lock, tt.published), func(t *testing.T) {
			if got := decide(tt.lock, tt.published); got != tt.want {
				t.Fatalf("decide = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAttachSpawnsThenJoins(t *testing.T) {
	f := newFixture(t)
	a := f.attacher("ready", "FAKE_HOLD=3s")
	conn, spawned, err := a.Attach(context.Background(), f.target)
	if err != nil || !spawned {
		t.Fatalf("Attach = %v, spawned %v", err, spawned)
	}
	if conn.pub.GenerationIdentity.ConfigurationFingerprint != f.target.Fingerprint {
		t.Fatalf("joined %+v", conn.pub)
	}
	// The coordinator holds the lock after the CLI has closed its copy.
	if !f.lockHeld() {
		t.Fatal("the Domain lock is free while the coordinator runs")
	}
	// A second CLI joins without spawning.
	_, spawned, err = a.Attach(context.Background(), f.target)
	if err != nil || spawned || f.spawns.Load() != 1 {
		t.Fatalf("second Attach = %v, spawned %v, spawns %d", err, spawned, f.spawns.Load())
	}
}

func TestAttachConcurrentSpawnsOnce(t *testing.T) {
	f := newFixture(t)
	a := f.attacher("ready", "FAKE_HOLD=3s")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := a.Attach(context.Background(), f.target)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := f.spawns.Load(); n != 1 {
		t.Fatalf("%d coordinators spawned, want 1", n)
	}
}

func TestAttachStartFailures(t *testing.T) {
	tests := []struct {
		mode string
		want error
		text string
	}{
		{"error", nil, "image localhost/x:1 is not in the local image store"},
		{"die", startup.ErrExited, "the coordinator exited during start"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFixture(t)
			_, _, err := f.attacher(tt.mode).Attach(context.Background(), f.target)
			if err == nil {
				t.Fatal("Attach succeeded")
			}
			var se *startup.Error
			if tt.want != nil && !errors.Is(err, tt.want) || tt.want == nil && !errors.As(err, &se) {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), tt.text) || !strings.Contains(err.Error(), f.target.LogPath()) {
				t.Fatalf("error %q lacks %q or the log path", err, tt.text)
			}
			// The lock is released once the coordinator is gone.
			deadline := time.Now().Add(5 * time.Second)
			for f.lockHeld() {
				if time.Now().After(deadline) {
					t.Fatal("the Domain lock stays held after a failed start")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if tt.mode == "die" {
				log, _ := os.ReadFile(f.target.LogPath())
				if !strings.Contains(string(log), "fake coordinator dying") {
					t.Errorf("coordinator stderr not in its log: %q", log)
				}
			}
		})
	}
}

func TestAttachFingerprintMismatch(t *testing.T) {
	f := newFixture(t)
	other := ids.Digest{0xaa, 0xbb}
	_, _, err := f.attacher("ready", "FAKE_HOLD=3s", "FAKE_FINGERPRINT="+other.String()).Attach(context.Background(), f.target)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("err = %v, want a MismatchError", err)
	}
	for _, want := range []string{other.String(), f.target.Fingerprint.String(), "end the sessions in the other terminals"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestAttachWaitsForStop(t *testing.T) {
	f := newFixture(t)
	if err := domainDir(f.target.Paths().Dir); err != nil {
		t.Fatal(err)
	}
	// Another process holds the lock with nothing published (a teardown);
	// when it lets go, this CLI spawns.
	other, err := OpenLock(f.target.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := other.TryLock(); !ok || err != nil {
		t.Fatal("could not take the lock", err)
	}
	time.AfterFunc(300*time.Millisecond, func() { other.Close() })
	p := &recordingProgress{}
	a := f.attacher("ready", "FAKE_HOLD=1s")
	a.Progress = p
	start := time.Now()
	_, spawned, err := a.Attach(context.Background(), f.target)
	if err != nil || !spawned {
		t.Fatalf("Attach = %v, spawned %v", err, spawned)
	}
	if time.Since(start) < 300*time.Millisecond || !p.waited || !p.done {
		t.Fatalf("did not wait: %v, %+v", time.Since(start), p)
	}
}

func TestAttachWaitTimeout(t *testing.T) {
	f := newFixture(t)
	if err := domainDir(f.target.Paths().Dir); err != nil {
		t.Fatal(err)
	}
	other, err := OpenLock(f.target.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ok, _ := other.TryLock(); !ok {
		t.Fatal("could not take the lock")
	}
	a := f.attacher("ready")
	a.Wait = 200 * time.Millisecond
	if _, _, err := a.Attach(context.Background(), f.target); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("err = %v, want ErrWaitTimeout", err)
	}
}

func TestAttachLeftover(t *testing.T) {
	tests := []struct {
		name string
		live string
	}{
		{"live records are left to the coordinator's recovery", "participant Sandbox of generation 01 in state Committed"},
		{"nothing live clears", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.live = tt.live
			p := f.target.Paths()
			if err := domainDir(p.Dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p.Identity, []byte("stale"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, spawned, err := f.attacher("ready", "FAKE_HOLD=1s").Attach(context.Background(), f.target)
			if err != nil || !spawned {
				t.Fatalf("Attach = %v, spawned %v", err, spawned)
			}

		})
	}
}

type recordingProgress struct {
	mu           sync.Mutex
	steps        []string
	waited, done bool
}

func (p *recordingProgress) Step(s string) { p.mu.Lock(); p.steps = append(p.steps, s); p.mu.Unlock() }
func (p *recordingProgress) Waiting()      { p.mu.Lock(); p.waited = true; p.mu.Unlock() }
func (p *recordingProgress) Done()         { p.mu.Lock(); p.done = true; p.mu.Unlock() }

func TestPrinterDelays(t *testing.T) {
	var b syncBuffer
	p := NewPrinter(&b, 100*time.Millisecond)
	p.Step("prepare")
	if b.String() != "" {
		t.Fatal("printed before the delay")
	}
	time.Sleep(200 * time.Millisecond)
	p.Step("sandbox")
	p.Done()
	p.Step("late")
	want := "lazaret: starting the Domain: prepare\nlazaret: starting the Domain: sandbox\n"
	if b.String() != want {
		t.Fatalf("printed %q, want %q", b.String(), want)
	}
	q := NewPrinter(&b, time.Hour)
	q.Step("quick")
	q.Done()
	if b.String() != want {
		t.Fatal("a quick start printed progress")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
