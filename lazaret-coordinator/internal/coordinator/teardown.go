package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/supervise"
)

// endReason says why a Ready generation ends.
type endReason int

const (
	endIdle     endReason = iota + 1 // no command for the linger
	endSignaled                      // the HC was asked to stop (SIGTERM)
	endLost                          // the sandbox runtime or the State Anchor ended
)

func (r endReason) String() string {
	switch r {
	case endIdle:
		return "idle"
	case endSignaled:
		return "stop requested"
	case endLost:
		return "runtime lost"
	}
	return "unknown"
}

// idleDeadline is when an idle generation ends: linger after the last
// command, and never before the join window for a generation that has
// not run a command yet.
func idleDeadline(since time.Time, linger time.Duration, ever bool) time.Time {
	if !ever && linger < joinWindow {
		linger = joinWindow
	}
	return since.Add(linger)
}

// waitIdle serves until the generation should end.
func (g *generation) waitIdle(ctx context.Context, sess *sessions, linger time.Duration) endReason {
	for {
		since, idle, ever := sess.idle()
		var timer <-chan time.Time
		if idle {
			d := time.Until(idleDeadline(since, linger, ever))
			if d <= 0 {
				return endIdle
			}
			timer = time.After(d)
		}
		select {
		case <-ctx.Done():
			return endSignaled
		case <-g.sandbox.exited:
			g.log.Error("sandbox runtime ended", "status", g.sandbox.status.String(), "err", fmt.Sprint(g.sandbox.err))
			g.trace.runtimeLost(errors.Is(g.sandbox.err, supervise.ErrNoExitReport))
			return endLost
		case <-g.anchor.Done():
			g.log.Error("state anchor ended")
			return endLost
		case <-g.view.Lost():
			g.log.Error("workspace view ended")
			return endLost
		case <-g.network.Lost():
			g.log.Error("network ended")
			return endLost
		case <-sess.changed:
		case <-timer:
		}
	}
}

// drainTimeout bounds how long a stopping coordinator, its listener
// closed, lets connected clients read the frames that ended their
// commands before it closes their connections.
const drainTimeout = 2 * time.Second

// stopServing stops the control server whose Serve closes served when it
// returns. With the listener closed (the publication is withdrawn before
// the server is stopped), Serve returns on its own once every client has
// hung up, which a CLI does after reading its command's exit; only then,
// or after grace, is the server canceled, which closes the connections
// left. Canceling at once would race the exit frame of a command that
// teardown ended and leave its CLI with a bare end of file.
func stopServing(cancel func(), served <-chan struct{}, grace time.Duration) {
	if served != nil {
		select {
		case <-served:
		case <-time.After(grace):
		}
	}
	cancel()
	if served != nil {
		<-served
	}
}

// teardown is BeginTeardown … FinishTeardown: publication withdrawn
// first (a joining CLI then waits on the lock), the control server
// stopped, every session closed, then the participants released in the
// reverse of the start order, the generation recorded Absent and deleted.
func (g *generation) teardown(sess *sessions, stopServer func()) error {
	if err := g.setPhase(domainstore.PhaseStopping); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "recording Stopping failed"))
	}
	ids := sess.close()
	g.trace.beginTeardown()
	if err := g.withdrawPublication(); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "withdrawing the publication failed"))
	}
	sess.stopAll(false)
	sess.waitIdle()
	stopServer()
	if err := g.closeSessions(ids, domainstore.SessionClosed); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "closing sessions failed"))
	}
	if err := g.releaseAll(); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "release failed"))
	}
	if err := g.setPhase(domainstore.PhaseAbsent); err != nil {
		return err
	}
	if err := g.finish(); err != nil {
		return err
	}
	g.trace.ended()
	return nil
}

// fail is FailDomain followed by this HC's own release of what it
// recorded: every command ends (RuntimeLost when the runtime is gone),
// the publication is withdrawn, sessions are Failed, the participants are
// released in order, and, when all are Clean, the generation goes through
// Recovering to Absent. The error says what failed and what is left.
func (g *generation) fail(sess *sessions, stopServer func(), why string) error {
	g.log.Error("generation failed", "reason", why)
	rec, err := g.phase()
	if err == nil && rec != domainstore.PhaseFailed {
		if err := g.setPhase(domainstore.PhaseFailed); err != nil {
			return err
		}
	}
	g.trace.fail()
	ids := sess.close()
	sess.stopAll(true)
	var errs []error
	if err := g.withdrawPublication(); err != nil {
		errs = append(errs, err)
	}
	sess.waitIdle()
	if stopServer != nil {
		stopServer()
	}
	if err := g.closeSessions(ids, domainstore.SessionFailed); err != nil {
		errs = append(errs, err)
	}
	if err := g.releaseAll(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("generation %s failed (%s) and was not fully released; recover it with `lazaret-cli recover`: %w", g.id, why, errors.Join(errs...))
	}
	if err := g.setPhase(domainstore.PhaseRecovering); err != nil {
		return err
	}
	if err := g.setPhase(domainstore.PhaseAbsent); err != nil {
		return err
	}
	if err := g.finish(); err != nil {
		return err
	}
	g.trace.ended()
	return fmt.Errorf("generation %s failed (%s); everything it held was released", g.id, why)
}

// releaseAll releases every started step in the reverse of the start
// order; the first failure stops it, leaving the rest recorded.
func (g *generation) releaseAll() error {
	g.mu.Lock()
	done := append([]Step(nil), g.done...)
	g.mu.Unlock()
	order, err := ReleaseOrder(done)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, step := range order {
		var err error
		switch step {
		case StepPublish:
			err = g.withdrawPublication()
		case StepSandbox:
			err = g.stopSandbox(ctx)
		case StepNetwork:
			err = g.network.Release(ctx)
		case StepGitRouting:
			err = g.view.Release(ctx)
		case StepTrust:
			g.trust = nil
		case StepAnchor:
			err = g.releaseAnchor(ctx)
		case StepPrepare:
			err = g.releasePrepare()
		}
		if err != nil {
			// What the live release could not undo (a dead State Anchor
			// takes runsc delete's way into its namespaces with it) is
			// released from the records, as the next start would.
			g.log.Warn("releasing the step from its records", "step", step.String(), "err", err.Error())
			if rerr := g.releaseFromRecords(step); rerr != nil {
				return fmt.Errorf("releasing the %s step: %w", step, errors.Join(err, rerr))
			}
		}
		g.trace.released(step)
		g.log.Info("released", "step", step.String())
	}
	return nil
}

// stepRoles are the participants each step records, in release order.
var stepRoles = map[Step][]domainstore.Role{
	StepPublish:    {domainstore.RolePublication},
	StepSandbox:    {domainstore.RoleSandbox},
	StepNetwork:    {domainstore.RoleHelper, domainstore.RoleNetwork},
	StepGitRouting: {domainstore.RoleGitRouting},
	StepAnchor:     {domainstore.RoleStateAnchor},
	StepPrepare:    {domainstore.RolePreparedLower},
}

// releaseFromRecords releases the step's participants that are not Clean
// as recovery does, from their records alone (recover.go).
func (g *generation) releaseFromRecords(step Step) error {
	for _, role := range stepRoles[step] {
		if _, err := g.releaseFromRecord(role, g.cfg.StorageRoot()); err != nil {
			return err
		}
	}
	return nil
}

// closeSessions records every registered session in phase.
func (g *generation) closeSessions(list []ids.SessionID, phase domainstore.SessionPhase) error {
	return g.store.Update(func(tx *domainstore.Tx) error {
		for _, id := range list {
			s, err := tx.Session(g.id, id)
			if err != nil {
				return err
			}
			if s.SessionPhase == domainstore.SessionClosed || s.SessionPhase == domainstore.SessionFailed {
				continue
			}
			s.SessionPhase = phase
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
}

func (g *generation) phase() (domainstore.DomainPhase, error) {
	var p domainstore.DomainPhase
	err := g.store.View(func(tx *domainstore.Tx) error {
		rec, err := tx.Generation(g.id)
		p = rec.DurableDecision
		return err
	})
	return p, err
}

// finish deletes the ended generation's records and its directory.
func (g *generation) finish() error {
	if err := g.store.Update(func(tx *domainstore.Tx) error { return tx.DeleteGeneration(g.id) }); err != nil {
		return fmt.Errorf("deleting the ended generation's records: %w", err)
	}
	if err := os.RemoveAll(g.dir); err != nil {
		return fmt.Errorf("removing the generation directory %q: %w", g.dir, err)
	}
	g.log.Info("generation ended")
	return nil
}
