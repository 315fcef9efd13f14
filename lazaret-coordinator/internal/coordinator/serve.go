package coordinator

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/locate"
	"lazaret.dev/pkg/paths"
	"lazaret.dev/pkg/protocol"
)

// Options are the inputs of `lazaret-coordinator serve`.
type Options struct {
	ConfigFile  string
	Profile     string
	Workspace   string
	Fingerprint string // 64 hex digits: ConfigurationFingerprintV1 as the CLI computed it
	Linger      time.Duration
	// Lock is the Domain lock, flocked by the CLI (fd 3); the HC holds it
	// until it exits.
	Lock *os.File
	// Report is the start report (fd 4).
	Report *os.File
	// Environment is the process environment (the values behind env:
	// references are read from it and kept in memory only).
	Environment paths.Environment
	// RecoverOnly ends after recovering what an earlier coordinator left,
	// reporting ready, without starting a generation.
	RecoverOnly bool
	// Session is the session of the CLI that spawned this coordinator (32
	// hex digits), or empty.
	Session string
	// Log receives helper output (the anchor's log); Logger the HC's own.
	Log    io.Writer
	Logger *slog.Logger
	// Settle, when set, is called once the generation is ready: what the
	// start allocated is garbage then, and main returns it to the
	// operating system (helpermain.Settle).
	Settle func()
}

// ErrFingerprint means the configuration resolved by the HC is not the
// one the CLI resolved.
var ErrFingerprint = errors.New("configuration fingerprint mismatch")

// ErrLock means fd 3 is not the Domain's lock held by this process.
var ErrLock = errors.New("domain lock not held")

// joinWindow is how long a fresh generation waits for its first command
// when --linger is shorter: the CLI that started it must have time to
// connect after `ready`.
const joinWindow = 5 * time.Second

// Serve runs one generation: start, serve until idle for the linger, tear
// down. It reports the start on opts.Report and returns nil after a clean
// teardown.
func Serve(ctx context.Context, opts Options) error {
	// The Domain lock lives in the open file description behind opts.Lock
	// for the coordinator's whole life and is released last, after teardown
	// and the final report. The deferred close also keeps the *os.File
	// reachable: otherwise its finalizer could close fd 3 mid-generation
	// and drop the lock while the sandbox runs.
	defer func() {
		if opts.Lock != nil {
			opts.Lock.Close()
		}
	}()
	rep := newReport(opts.Report)
	err := serve(ctx, opts, rep)
	if err != nil {
		rep.fail(err)
	}
	return err
}

func serve(ctx context.Context, opts Options, rep *report) error {
	log := opts.Logger
	if err := checkSession(opts.Session); err != nil {
		return err
	}
	if err := checkLockFD(opts.Lock); err != nil {
		return err
	}
	ws, err := paths.Workspace(opts.Workspace)
	if err != nil {
		return fmt.Errorf("workspace %q: %w", opts.Workspace, err)
	}
	cfg, err := config.ResolveFile(config.Options{
		Profile: opts.Profile, Workspace: ws, Layout: layout.Production(),
		Environment: opts.Environment, File: opts.ConfigFile,
	})
	if err != nil {
		return fmt.Errorf("resolving the configuration: %w", err)
	}
	defer cfg.Close()
	fp := cfg.Fingerprint()
	if got := hex.EncodeToString(fp[:]); got != opts.Fingerprint {
		return fmt.Errorf("%w: the CLI resolved %s, the coordinator resolved %s; the configuration file changed in between, start again", ErrFingerprint, opts.Fingerprint, got)
	}
	domain := cfg.DomainID()
	runtimeRoot := cfg.RuntimeRoot()
	if err := paths.EnsureRuntimeRoot(runtimeRoot, opts.Environment.UID); err != nil {
		return err
	}
	cp := control.DomainPaths(runtimeRoot, domain)
	if err := sameFile(opts.Lock, filepath.Join(cp.Dir, "lock")); err != nil {
		return err
	}
	help, err := findHelpers(opts.Environment)
	if err != nil {
		return err
	}
	m, err := anchor.HostIDMap()
	if err != nil {
		return fmt.Errorf("choosing the user-namespace ID map: %w", err)
	}
	st, err := domainstore.Create(cfg.StorageRoot(), domainstore.Domain{
		DomainID: domain, ProfileName: cfg.Profile(), CanonicalWorkspace: cfg.Workspace(),
	}, domainstore.Options{})
	if err != nil {
		return fmt.Errorf("opening the domain store: %w", err)
	}
	defer st.Close()
	tr, err := openTracer(opts.Environment, domain, log)
	if err != nil {
		return err
	}
	defer tr.close()
	tr.rules = func(argv []string) bool { return escalation.RuleAdmits(argv, cfg.AutoApprovalRules()) }
	if live, err := liveGenerations(st); err != nil {
		return err
	} else if live > 0 {
		rep.progress("recover")
		t0 := time.Now()
		recovered, err := recoverDomain(st, cfg.StorageRoot(), cp, log, tr)
		for _, r := range recovered {
			log.Info("recovered a generation", "generation", r.GenerationID.String(), "from", r.From.String(),
				"released", r.Released, "seconds", time.Since(t0).Seconds())
		}
		if err != nil {
			return fmt.Errorf("recovering the generation an earlier coordinator left: %w", err)
		}
	}
	if opts.RecoverOnly {
		rep.ready()
		return nil
	}
	selfPidfd, err := hostid.OpenPidfd(os.Getpid())
	if err != nil {
		return fmt.Errorf("opening the coordinator's own pidfd: %w", err)
	}
	defer unix.Close(selfPidfd)
	self, err := hostid.IdentityOf(selfPidfd)
	if err != nil {
		return fmt.Errorf("identifying the coordinator: %w", err)
	}
	// Let a CLI of this user prove which process holds the lock: this
	// process is non-dumpable, so its descriptors are hidden from them.
	if err := control.WriteCoordinatorIdentity(cp.Dir, self); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(cp.Dir, control.CoordinatorName))

	s := &scope{
		log: log, cfg: cfg, store: st, help: help, trace: tr,
		domain: domain, id: ids.GenerationID(ids.New()),
		coordinator: ids.CoordinatorID(ids.New()), sandboxID: ids.SandboxID(ids.New()),
		sidecarID:   ids.SidecarID(ids.New()),
		fingerprint: fp, self: self,
		runtimeRoot: runtimeRoot, storageRoot: cfg.StorageRoot(), paths: cp, idMap: m,
		participants: map[domainstore.Role]domainstore.Participant{},
	}
	s.dir = filepath.Join(cp.Dir, "gen-"+s.id.String())
	if s.escalationTimeouts, err = escalationTimeouts(opts.Environment); err != nil {
		return err
	}
	s.ident = protocol.GenerationIdentity{
		AgentProfile: cfg.Profile(), DomainID: domain, GenerationID: s.id,
		ConfigurationFingerprint: fp, CoordinatorID: s.coordinator, SandboxID: s.sandboxID,
	}
	s.log = log.With("generation", s.id.String())
	if s.broker, err = newBrokerMaterial(cfg, s.id.String()[:16]); err != nil {
		return err
	}
	g, err := newGeneration(s, participantEnv{environ: opts.Environment.LookupEnv, helperLog: opts.Log})
	if err != nil {
		return err
	}
	if err := st.Update(func(tx *domainstore.Tx) error {
		return tx.PutGeneration(domainstore.Generation{
			DomainID: domain, GenerationID: s.id, ConfigurationFingerprint: fp,
			CoordinatorID: s.coordinator, NetworkSidecarID: s.sidecarID,
			SandboxID: s.sandboxID, DurableDecision: domainstore.PhaseStarting,
		})
	}); err != nil {
		return fmt.Errorf("recording the generation: %w", err)
	}
	s.log.Info("generation starting", "domain", domain.String(), "profile", cfg.Profile(), "workspace", cfg.Workspace(),
		"runsc", help.Runsc, "platform", help.Platform, "id_map", m.String())

	sess := newSessions(s, g.sandbox, g.trust)
	tr.begin(s.id, opts.Session)
	if err := g.start(ctx, rep); err != nil {
		s.log.Error("start failed", "err", err.Error())
		rep.fail(err)
		return errors.Join(err, g.fail(sess, nil, "start failed"))
	}
	srvCtx, cancelServer := context.WithCancel(context.Background())
	served, err := g.serveControl(srvCtx, sess)
	stopServer := func() { stopServing(cancelServer, served, drainTimeout) }
	if err != nil {
		stopServer()
		rep.fail(err)
		return errors.Join(err, g.fail(sess, nil, "control server failed"))
	}
	if err := s.setPhase(domainstore.PhaseReady); err != nil {
		rep.fail(err)
		return errors.Join(err, g.fail(sess, stopServer, "recording Ready failed"))
	}
	sess.published()
	if rv, ok := g.view.(*routeView); ok {
		rep.kept(rv.keptOnly)
	}
	rep.ready()
	s.log.Info("generation ready", "socket", cp.Socket, "identity", cp.Identity)
	if opts.Settle != nil {
		opts.Settle()
	}

	reason := g.waitIdle(ctx, sess, opts.Linger)
	s.log.Info("ending generation", "reason", reason.String())
	if reason == endLost {
		return g.fail(sess, stopServer, "runtime lost")
	}
	return g.teardown(sess, stopServer)
}

// checkSession checks the --session flag: empty, or a session ID in hex.
func checkSession(s string) error {
	if s == "" {
		return nil
	}
	var id ids.ID
	return ids.ParseHex(id[:], s, "--session")
}

// checkLockFD checks that f is a regular file this process holds an
// exclusive flock on. flock on the open file description the CLI locked
// succeeds again; on any other it would block, so LOCK_NB fails.
func checkLockFD(f *os.File) error {
	if f == nil {
		return fmt.Errorf("%w: no lock descriptor (fd 3) was passed; the coordinator is started by lazaret-cli", ErrLock)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("%w: fd 3: %v", ErrLock, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: fd 3 is not a regular file", ErrLock)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("%w: fd 3 is locked by another holder: %v", ErrLock, err)
	}
	return nil
}

// sameFile checks that f is the file at path.
func sameFile(f *os.File, path string) error {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		return fmt.Errorf("%w: fd 3: %v", ErrLock, err)
	}
	if err := unix.Lstat(path, &b); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrLock, path, err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		return fmt.Errorf("%w: fd 3 is not the Domain lock %q", ErrLock, path)
	}
	return nil
}

// liveGenerations counts the generations in st that did not end: an
// earlier coordinator died holding them.
func liveGenerations(st *domainstore.Store) (int, error) {
	n := 0
	err := st.View(func(tx *domainstore.Tx) error {
		c, err := tx.Scan()
		if err != nil {
			return fmt.Errorf("scanning the domain store %q: %w", st.Path(), err)
		}
		for _, g := range c.Generations {
			if g.Generation.DurableDecision != domainstore.PhaseAbsent || len(g.Participants) > 0 {
				n++
			}
		}
		return nil
	})
	return n, err
}

// findHelpers locates the helper programs and the runsc platform.
func findHelpers(env paths.Environment) (helpers, error) {
	f, err := locate.New()
	if err != nil {
		return helpers{}, fmt.Errorf("locating helper binaries: %w", err)
	}
	var h helpers
	for name, dst := range map[string]*string{"lazaret-anchor": &h.Anchor, "lazaret-supervisor": &h.Supervisor, "lazaret-guest": &h.Guest} {
		if *dst, err = f.Find(name); err != nil {
			return helpers{}, fmt.Errorf("locating %s: %w", name, err)
		}
	}
	if h.Runsc, err = LocateRunsc(env.LookupEnv, f); err != nil {
		return helpers{}, err
	}
	v, _ := env.LookupEnv(EnvRunscPlatform)
	actions, _ := os.ReadFile(seccompActions) // unreadable: no seccomp, so ptrace
	if h.Platform, err = ChoosePlatform(v, string(actions)); err != nil {
		return helpers{}, err
	}
	return h, nil
}
