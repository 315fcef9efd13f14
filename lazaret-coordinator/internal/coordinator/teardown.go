package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lazaret.dev/pkg/domainstore"
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

// lostMessages are the log lines of a participant that ended on its own.
var lostMessages = map[Step]string{
	StepAnchor:     "state anchor ended",
	StepGitRouting: "workspace view ended",
	StepNetwork:    "network ended",
}

// waitIdle serves until the generation should end.
func (g *generation) waitIdle(ctx context.Context, sess *sessions, linger time.Duration) endReason {
	stop := make(chan struct{})
	defer close(stop)
	lost := g.lost(stop)
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
		case step := <-lost:
			if step == StepSandbox {
				sb := g.sandbox.sb
				g.s.log.Error("sandbox runtime ended", "status", sb.status.String(), "err", fmt.Sprint(sb.err))
				g.s.trace.runtimeLost(errors.Is(sb.err, supervise.ErrNoExitReport))
			} else {
				g.s.log.Error(lostMessages[step], "step", step.String())
			}
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
	if err := g.s.setPhase(domainstore.PhaseStopping); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "recording Stopping failed"))
	}
	ids := sess.close()
	g.s.trace.beginTeardown()
	if err := g.pub.Release(context.Background()); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "withdrawing the publication failed"))
	}
	sess.stopAll(false)
	sess.waitIdle()
	stopServer()
	if err := g.s.closeSessions(ids, domainstore.SessionClosed); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "closing sessions failed"))
	}
	if err := g.releaseAll(); err != nil {
		return errors.Join(err, g.fail(sess, stopServer, "release failed"))
	}
	if err := g.s.setPhase(domainstore.PhaseAbsent); err != nil {
		return err
	}
	if err := g.s.finish(); err != nil {
		return err
	}
	g.s.trace.ended()
	return nil
}

// fail is FailDomain followed by this HC's own release of what it
// recorded: every command ends (RuntimeLost when the runtime is gone),
// the publication is withdrawn, sessions are Failed, the participants are
// released in order, and, when all are Clean, the generation goes through
// Recovering to Absent. The error says what failed and what is left.
func (g *generation) fail(sess *sessions, stopServer func(), why string) error {
	g.s.log.Error("generation failed", "reason", why)
	rec, err := g.s.phase()
	if err == nil && rec != domainstore.PhaseFailed {
		if err := g.s.setPhase(domainstore.PhaseFailed); err != nil {
			return err
		}
	}
	g.s.trace.fail()
	ids := sess.close()
	sess.stopAll(true)
	var errs []error
	if err := g.pub.Release(context.Background()); err != nil {
		errs = append(errs, err)
	}
	sess.waitIdle()
	if stopServer != nil {
		stopServer()
	}
	if err := g.s.closeSessions(ids, domainstore.SessionFailed); err != nil {
		errs = append(errs, err)
	}
	if err := g.releaseAll(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("generation %s failed (%s) and was not fully released; recover it with `lazaret-cli recover`: %w", g.s.id, why, errors.Join(errs...))
	}
	if err := g.s.setPhase(domainstore.PhaseRecovering); err != nil {
		return err
	}
	if err := g.s.setPhase(domainstore.PhaseAbsent); err != nil {
		return err
	}
	if err := g.s.finish(); err != nil {
		return err
	}
	g.s.trace.ended()
	return fmt.Errorf("generation %s failed (%s); everything it held was released", g.s.id, why)
}
