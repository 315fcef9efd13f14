package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
)

// stateAnchor is the State Anchor participant (MountStateAnchor): the
// user and mount namespaces and the overlay root, lower = the prepared
// artifact, upper and work = the Domain's state under the storage root,
// merged = the generation's rootfs directory. Later participants run
// their programs in its namespaces through it.
type stateAnchor struct {
	s      *scope
	lower  *preparedLower
	stderr io.Writer // the anchor's log

	// a is set by Start before any later step runs and never cleared:
	// sessions may still hold it while the teardown releases it, and
	// live says whether it still runs.
	a *anchor.Anchor

	mu       sync.Mutex
	released *anchor.ReleaseEvidence
}

func (p *stateAnchor) Step() Step { return StepAnchor }

// Lost is closed when the anchor process ended.
func (p *stateAnchor) Lost() <-chan struct{} {
	if p.a == nil {
		return nil
	}
	return p.a.Done()
}

// live reports whether the anchor runs, and with it its namespaces.
func (p *stateAnchor) live() bool {
	if p.a == nil {
		return false
	}
	select {
	case <-p.a.Done():
		return false
	default:
		return true
	}
}

// errAnchorGone means the State Anchor, and its namespaces with it, ended.
var errAnchorGone = errors.New("the state anchor is gone")

// command returns argv wrapped to run in the anchor's namespaces.
func (p *stateAnchor) command(ctx context.Context, argv []string) (*exec.Cmd, error) {
	if !p.live() {
		return nil, errAnchorGone
	}
	return p.a.CommandInNamespaces(ctx, argv)
}

// run runs argv inside the anchor's namespaces with the runsc environment
// and returns its stdout; stderr goes into the error.
func (p *stateAnchor) run(ctx context.Context, argv []string) ([]byte, error) {
	cmd, err := p.command(ctx, argv)
	if err != nil {
		return nil, err
	}
	cmd.Env = runscEnv
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("running %q: %w: %s", argv[len(argv)-2:], err, oneLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// enterArgs returns argv prefixed to enter the anchor's namespaces.
func (p *stateAnchor) enterArgs(argv []string) ([]string, error) {
	if !p.live() {
		return nil, errAnchorGone
	}
	return p.a.EnterArgs(argv)
}

// openNamespaces opens the anchor's user and mount namespaces, checked
// against its Ready report, for a child that enters them itself; the
// caller closes them once the child is forked.
func (p *stateAnchor) openNamespaces() ([]*os.File, error) {
	if !p.live() {
		return nil, errAnchorGone
	}
	return p.a.OpenNamespaces()
}

// pid is the anchor's PID; the anchor is the HC's unreaped child, so the
// PID names it while it is not released.
func (p *stateAnchor) pid() int { return p.a.Pid() }

func (p *stateAnchor) Start(ctx context.Context) error {
	s := p.s
	const role = domainstore.RoleStateAnchor
	stateDir := filepath.Join(s.storageRoot, "state", s.domain.String())
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("creating the Domain state directory %q: %w", stateDir, err)
	}
	upper, work, merged := filepath.Join(stateDir, "upper"), filepath.Join(stateDir, "work"), s.rootfsDir()
	art := p.lower.artifact
	if err := s.intent(role); err != nil {
		return err
	}
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		sa := o.StateAnchor
		sa.LowerArtifactID = ptr(art.PreparedArtifactID)
		sa.UpperPath = ptr(upper)
		sa.WorkPath = ptr(work)
		sa.MergedPath = ptr(merged)
	}); err != nil {
		return err
	}
	s.log.Info("starting state anchor", "lower", art.Path, "upper", upper, "work", work, "merged", merged, "id_map", s.idMap.String())
	a, err := anchor.Start(ctx, anchor.Spec{
		AnchorPath: s.help.Anchor,
		Lower:      art.Path,
		Upper:      upper, Work: work, Merged: merged,
		IDMap:  s.idMap,
		Stderr: p.stderr,
		Logger: s.log,
	})
	if err != nil {
		return fmt.Errorf("starting the state anchor: %w", err)
	}
	p.a = a
	ready := a.Ready()
	// The anchor has no gate before its execve; it is staged as soon as its
	// identity is verified. Until Start returned, its only channel was this
	// process's, and it unmounts and exits when that closes.
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.StateAnchor.Daemon = hostid.StagedOwnership(ready.Daemon)
		o.StateAnchor.Mount = ptr(ready.Mount)
	}); err != nil {
		return err
	}
	return s.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.StateAnchor.Daemon = committed(ready.Daemon)
	})
}

// Release is UnmountStateAnchor: Release, its evidence checked against
// Ready, then Clean.
func (p *stateAnchor) Release(ctx context.Context) error {
	s := p.s
	const role = domainstore.RoleStateAnchor
	if err := s.releaseIntent(role, nil); err != nil {
		return err
	}
	method := "state anchor never started"
	if a := p.a; a != nil {
		select {
		case <-a.Done():
			// It already ended (it unmounts on its way out, and the
			// kernel removes the namespace with its last process).
			a.Wait()
			method = "state anchor process reaped; its mount namespace ended with it"
		default:
			ev, err := a.Release(ctx)
			if err != nil {
				a.Kill()
				a.Wait()
				return fmt.Errorf("releasing the state anchor: %w", err)
			}
			p.mu.Lock()
			p.released = &ev
			p.mu.Unlock()
			method = "state anchor reported release evidence equal to Ready and exited 0"
		}
	}
	return s.clean(role, method)
}

// evidence is the anchor's release evidence as the PreparedLower lease's
// ReleaseIntent records it, or nil when it reported none.
func (p *stateAnchor) evidence() *domainstore.StateAnchorReleaseEvidence {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released == nil {
		return nil
	}
	ev := *p.released
	return &domainstore.StateAnchorReleaseEvidence{
		Daemon:         committed(ev.Daemon),
		UserNamespace:  ev.UserNamespace,
		MountNamespace: ev.MountNamespace,
		Mount:          ev.Mount,
	}
}

// recoverStateAnchor kills the recorded anchor; its overlay lived in its
// own mount namespace.
func recoverStateAnchor(s *scope, o *domainstore.ParticipantOwnership) (string, error) {
	a, err := killRecorded(s.log, "state anchor", o.StateAnchor.Daemon)
	if err != nil {
		return "", err
	}
	return "state anchor " + a + "; its overlay lived in its own mount namespace, which ended with it", nil
}
