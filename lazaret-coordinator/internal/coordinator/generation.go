package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
)

// participant is one step of the start order and everything it acquires:
// its own state, its start, its release in a live generation, and the
// way each role it records is released from the record alone after a
// crash (recoverers). Each lives in one file.
type participant interface {
	// Step is the participant's place in the start order (plan.go).
	Step() Step
	// Start acquires the participant, recording each role before it is
	// acquired and committing it after.
	Start(ctx context.Context) error
	// Release undoes Start, also after a Start that failed half way, and
	// records each role Clean with its proof. It runs once, in the
	// reverse of the start order.
	Release(ctx context.Context) error
	// Lost is closed when what the participant runs ended on its own,
	// which fails the generation; nil when nothing of it can end alone.
	Lost() <-chan struct{}
}

// recoverers release a role's participant from its record alone, with no
// live state: a process only through a pidfd whose pidfs identity matches
// the record, a file only when its mount ID, device and inode match. Each
// returns how it released. Each lives in its participant's file.
var recoverers = map[domainstore.Role]func(s *scope, o *domainstore.ParticipantOwnership) (string, error){
	domainstore.RolePublication:   recoverPublication,
	domainstore.RoleSandbox:       recoverSandbox,
	domainstore.RoleHelper:        recoverHelper,
	domainstore.RoleNetwork:       recoverNetwork,
	domainstore.RoleGitRouting:    recoverGitRouting,
	domainstore.RoleStateAnchor:   recoverStateAnchor,
	domainstore.RolePreparedLower: recoverPreparedLower,
}

// generation is one run of a Domain: its scope and its participants in
// the model's start order. The typed fields name the same participants
// for the code that serves the generation (the control server, the
// sessions); each is set once, before the first step, and never cleared.
type generation struct {
	s     *scope
	order []participant

	prepared *preparedLower
	anchor   *stateAnchor
	trust    *trustStep
	view     workspaceView
	network  networkView
	sandbox  *sandboxStep
	pub      *publication

	mu      sync.Mutex
	started []participant // begun, in start order: what release undoes
}

// newGeneration builds the participants of a generation in the model's
// start order; a participant whose construction locates helpers or
// derives a plan fails here, before anything is acquired.
func newGeneration(s *scope, env participantEnv) (*generation, error) {
	g := &generation{s: s}
	g.prepared = &preparedLower{s: s}
	g.anchor = &stateAnchor{s: s, lower: g.prepared, stderr: env.helperLog}
	g.prepared.released = g.anchor.evidence
	g.trust = &trustStep{s: s}
	view, err := chooseWorkspaceView(s, g.anchor, env)
	if err != nil {
		return nil, err
	}
	g.view = view
	if g.network, err = newSidecarNetwork(s, g.anchor, env.helperLog); err != nil {
		return nil, err
	}
	g.sandbox = &sandboxStep{s: s, anchor: g.anchor, image: g.prepared, view: g.view, network: g.network}
	g.pub = &publication{s: s, trust: g.trust}
	byStep := map[Step]participant{}
	for _, p := range []participant{g.prepared, g.anchor, g.trust, g.view, g.network, g.sandbox, g.pub} {
		byStep[p.Step()] = p
	}
	for _, st := range StartOrder(PlanInput{GitRoutingDaemon: g.view.Participant(), NetworkSidecar: g.network.Participant()}) {
		g.order = append(g.order, byStep[st])
	}
	return g, nil
}

// start runs the start order, reporting each step as it begins and ends:
// a step begins once every step it needs is done (plan.go, Needs), so
// steps that need nothing of each other overlap. After a failure nothing
// more begins, the steps under way are cancelled and awaited, and the
// first failure is returned.
func (g *generation) start(ctx context.Context, rep *report) error {
	s := g.s
	if err := s.makeDirs(); err != nil {
		return err
	}
	if err := takeReviewBaseline(s); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var steps []Step
	for _, p := range g.order {
		steps = append(steps, p.Step())
	}
	type ended struct {
		step Step
		err  error
	}
	results := make(chan ended)
	done := map[Step]bool{}
	pending := slices.Clone(g.order)
	running := 0
	var first error
	for {
		for i := 0; first == nil && i < len(pending); {
			p := pending[i]
			if !allDone(Needs(p.Step(), steps), done) {
				i++
				continue
			}
			pending = slices.Delete(pending, i, i+1)
			step := p.Step()
			rep.step(step)
			g.mu.Lock()
			g.started = append(g.started, p)
			g.mu.Unlock()
			running++
			go func() {
				t0 := time.Now()
				err := p.Start(ctx)
				if err == nil {
					s.trace.stepDone(step)
					s.log.Info("step done", "step", step.String(), "seconds", time.Since(t0).Seconds())
					rep.stepDone(step)
				}
				results <- ended{step, err}
			}()
		}
		if running == 0 {
			break
		}
		r := <-results
		running--
		if r.err != nil {
			if first == nil {
				first = &stepError{Step: r.step, Err: r.err}
				cancel()
			}
			continue
		}
		done[r.step] = true
	}
	if first == nil && len(pending) > 0 {
		return fmt.Errorf("the start order cannot begin %v: a step it needs is missing", pending[0].Step())
	}
	return first
}

func allDone(steps []Step, done map[Step]bool) bool {
	for _, st := range steps {
		if !done[st] {
			return false
		}
	}
	return true
}

// releaseAll releases every begun participant in the reverse of the start
// order; the first failure stops it, leaving the rest recorded.
func (g *generation) releaseAll() error {
	s := g.s
	g.mu.Lock()
	started := append([]participant(nil), g.started...)
	g.mu.Unlock()
	// Steps that overlapped began in either order; release follows the
	// model's order all the same.
	slices.SortStableFunc(started, func(a, b participant) int { return int(a.Step()) - int(b.Step()) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := len(started) - 1; i >= 0; i-- {
		step := started[i].Step()
		if err := started[i].Release(ctx); err != nil {
			// What the live release could not undo (a dead State Anchor
			// takes runsc delete's way into its namespaces with it) is
			// released from the records, as the next start would.
			s.log.Warn("releasing the step from its records", "step", step.String(), "err", err.Error())
			if rerr := releaseStepFromRecords(s, step); rerr != nil {
				return fmt.Errorf("releasing the %s step: %w", step, errors.Join(err, rerr))
			}
		}
		s.trace.released(step)
		s.log.Info("released", "step", step.String())
	}
	return nil
}

// lost returns a channel that yields the step of the first participant
// that ended on its own, until stop is closed.
func (g *generation) lost(stop <-chan struct{}) <-chan Step {
	out := make(chan Step, len(g.order))
	for _, p := range g.order {
		ch := p.Lost()
		if ch == nil {
			continue
		}
		go func(step Step) {
			select {
			case <-ch:
				out <- step
			case <-stop:
			}
		}(p.Step())
	}
	return out
}

// serveControl starts the control server on the published listener.
func (g *generation) serveControl(ctx context.Context, sess *sessions) (<-chan struct{}, error) {
	t := g.trust.anchor
	srv, err := control.NewServer(control.Config{
		CA: t.ca, TLS: t.serverTLS,
		CoordinatorKey: t.coordinatorKey, Coordinator: t.coordinator, Sandbox: t.sandbox,
		Sessions: sess, OnRegister: sess.register, Ports: g.network, Logger: g.s.log,
	})
	if err != nil {
		return nil, fmt.Errorf("building the control server: %w", err)
	}
	ln := g.pub.listener()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Withdrawing the publication closes the listener first (the
		// model's BeginTeardown), which ends Serve with net.ErrClosed.
		if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
			g.s.log.Error("control server stopped", "err", err.Error())
		}
	}()
	return done, nil
}

// participantEnv is what Serve hands the participants' constructors.
type participantEnv struct {
	environ   func(string) (string, bool)
	helperLog io.Writer
}
