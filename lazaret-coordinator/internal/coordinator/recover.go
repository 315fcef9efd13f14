package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/sys"
)

// recoverKillWait bounds the wait for a killed recorded process to exit.
const recoverKillWait = 15 * time.Second

// Recovered is one generation an earlier coordinator left, and how each
// of its participants was released.
type Recovered struct {
	GenerationID ids.GenerationID
	From         domainstore.DomainPhase
	Released     []string
}

// recoverDomain releases every generation in st that is not Absent: the
// model's FailDomain (the generation Failed, its open sessions Failed),
// BeginRecovery (Recovering), each participant released from its record
// alone, and FinishRecovery (Absent, then the records and the generation
// directory removed). It runs under the Domain lock, so no coordinator of
// these generations is alive. A process is killed only through a pidfd
// whose pidfs identity matches the recorded one, a file is removed only
// when its mount ID, device and inode match the record; a PID or a path
// alone authorises nothing. The workspace, the persistent directories and
// the isolated roots are never touched.
func recoverDomain(st *domainstore.Store, storageRoot string, cp control.Paths, log *slog.Logger, tr *tracer) ([]Recovered, error) {
	var c domainstore.Contents
	if err := st.View(func(tx *domainstore.Tx) error {
		var err error
		c, err = tx.Scan()
		return err
	}); err != nil {
		return nil, fmt.Errorf("scanning the domain store %q: %w", st.Path(), err)
	}
	var out []Recovered
	for _, gc := range c.Generations {
		if gc.Generation.DurableDecision == domainstore.PhaseAbsent && len(gc.Participants) == 0 {
			continue
		}
		r, err := recoverGeneration(st, storageRoot, cp, gc, log, tr)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func recoverGeneration(st *domainstore.Store, storageRoot string, cp control.Paths, gc domainstore.GenerationRecords, log *slog.Logger, tr *tracer) (Recovered, error) {
	rec := gc.Generation
	s := &scope{
		store: st, domain: rec.DomainID, id: rec.GenerationID,
		log:          log.With("recovering", rec.GenerationID.String()),
		participants: map[domainstore.Role]domainstore.Participant{},
		paths:        cp,
		storageRoot:  storageRoot,
		trace:        tr,
	}
	s.dir = filepath.Join(cp.Dir, "gen-"+s.id.String())
	for _, p := range gc.Participants {
		s.participants[p.Role] = p
	}
	r := Recovered{GenerationID: rec.GenerationID, From: rec.DurableDecision}
	tr.recovering(rec.GenerationID, rec.DurableDecision)
	s.log.Warn("recovering a generation an earlier coordinator left", "phase", rec.DurableDecision.String(), "participants", len(gc.Participants))

	switch rec.DurableDecision {
	case domainstore.PhaseStarting, domainstore.PhaseReady, domainstore.PhaseStopping:
		if err := s.setPhase(domainstore.PhaseFailed); err != nil {
			return r, err
		}
		fallthrough
	case domainstore.PhaseFailed:
		var open []ids.SessionID
		for _, sess := range gc.Sessions {
			if sess.SessionPhase != domainstore.SessionClosed && sess.SessionPhase != domainstore.SessionFailed {
				open = append(open, sess.SessionID)
			}
		}
		if err := s.closeSessions(open, domainstore.SessionFailed); err != nil {
			return r, fmt.Errorf("recording the sessions of generation %s Failed: %w", s.id, err)
		}
		if err := s.setPhase(domainstore.PhaseRecovering); err != nil {
			return r, err
		}
	}
	for _, role := range RecoveryOrder() {
		method, err := releaseFromRecord(s, role)
		if err != nil {
			return r, fmt.Errorf("recovering generation %s: %w", s.id, err)
		}
		if method != "" {
			r.Released = append(r.Released, role.String()+": "+method)
		}
		tr.recovered(role)
		if role == domainstore.RoleSandbox {
			// The sessions' guest processes ended with the sandbox; their
			// exec clients are released from their records next.
			for _, t := range gc.Terminals {
				if err := releaseTerminalRecord(s, t); err != nil {
					return r, fmt.Errorf("recovering generation %s: %w", s.id, err)
				}
			}
		}
	}
	if err := s.setPhase(domainstore.PhaseAbsent); err != nil {
		return r, err
	}
	if err := s.finish(); err != nil {
		return r, err
	}
	tr.finishRecovery()
	return r, nil
}

// releaseStepFromRecords releases the step's participants that are not
// Clean as recovery does, from their records alone.
func releaseStepFromRecords(s *scope, step Step) error {
	for _, role := range stepRoles[step] {
		if _, err := releaseFromRecord(s, role); err != nil {
			return err
		}
	}
	return nil
}

// releaseFromRecord releases role's participant, unless it is absent or
// Clean, from its record alone: ReleaseIntent, the release, then Clean
// with how. It returns how, or "" when there was nothing to release.
func releaseFromRecord(s *scope, role domainstore.Role) (string, error) {
	p, ok := s.current(role)
	if !ok || p.State == domainstore.StateClean {
		return "", nil
	}
	if err := s.releaseIntent(role, recordReleaseIntent); err != nil {
		return "", err
	}
	p, _ = s.current(role)
	method := "nothing was acquired (bare Intent)"
	if p.Ownership != nil {
		var err error
		if method, err = recoverers[role](s, p.Ownership); err != nil {
			return "", fmt.Errorf("releasing the %v participant from its record: %w", role, err)
		}
	}
	return method, s.clean(role, method)
}

// releaseTerminalRecord releases a session terminal an earlier coordinator
// left, from its record alone: its exec client killed through its
// recorded pidfs identity (its guest process ended with the sandbox,
// released before), ReleaseIntent, then Clean with that proof.
func releaseTerminalRecord(s *scope, t domainstore.SessionTerminal) error {
	if t.State == domainstore.TerminalClean {
		return nil
	}
	how, err := killRecorded(s.log, "session exec client", t.ExecClient)
	if err != nil {
		return fmt.Errorf("releasing the terminal of session %s: %w", t.SessionID, err)
	}
	if t.State != domainstore.TerminalReleaseIntent && !t.Bare() {
		ri := t
		ri.State = domainstore.TerminalReleaseIntent
		if err := s.store.Update(func(tx *domainstore.Tx) error { return tx.PutTerminal(ri, nil) }); err != nil {
			return fmt.Errorf("recording the terminal of session %s ReleaseIntent: %w", t.SessionID, err)
		}
	}
	clean := domainstore.SessionTerminal{GenerationID: t.GenerationID, SessionID: t.SessionID, State: domainstore.TerminalClean}
	proof := store.ProvenAbsent("exec client " + how + "; its guest process ended with the released sandbox")
	if err := s.store.Update(func(tx *domainstore.Tx) error { return tx.PutTerminal(clean, proof) }); err != nil {
		return fmt.Errorf("recording the terminal of session %s Clean: %w", t.SessionID, err)
	}
	s.log.Info("released a session terminal from its record", "session", t.SessionID.String(), "exec_client", how)
	return nil
}

// recordReleaseIntent moves the phases inside a record along with its
// participant's ReleaseIntent, as the store's guard requires.
func recordReleaseIntent(o *domainstore.ParticipantOwnership) {
	if o.PreparedLower != nil && o.PreparedLower.LeaseState != nil {
		o.PreparedLower.LeaseState = ptr(domainstore.LeaseReleaseIntent)
	}
}

// killRecorded kills the process o records when, and only when, a pidfd
// opened on its PID shows the recorded pidfs identity, and waits for it
// to exit. It says what it found.
func killRecorded(log *slog.Logger, what string, o hostid.PersistedHostProcessOwnership) (string, error) {
	if o.IsUnassigned() {
		return "never started", nil
	}
	fd, err := hostid.OpenPidfd(int(o.Identity.HostPID))
	if err != nil {
		if errors.Is(err, unix.ESRCH) || errors.Is(err, hostid.ErrProcessExited) {
			return "had exited", nil
		}
		return "", fmt.Errorf("opening a pidfd for the recorded %s (pid %d): %w", what, o.Identity.HostPID, err)
	}
	defer unix.Close(fd)
	match, err := hostid.PidfsRecoveryMatch(o.Identity, fd)
	if err != nil {
		return "", fmt.Errorf("matching the recorded %s (pid %d): %w", what, o.Identity.HostPID, err)
	}
	if !match {
		return "had exited (its pid now names another process, left alone)", nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return "", fmt.Errorf("killing the recorded %s (pid %d): %w", what, o.Identity.HostPID, err)
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(recoverKillWait)
	for {
		n, err := sys.Poll(fds, 200)
		if err != nil {
			return "", fmt.Errorf("waiting for the recorded %s (pid %d): %w", what, o.Identity.HostPID, err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the recorded %s (pid %d) did not exit within %v of SIGKILL", what, o.Identity.HostPID, recoverKillWait)
		}
	}
	log.Info("killed a recorded process", "what", what, "pid", o.Identity.HostPID)
	return fmt.Sprintf("(pid %d) killed through a pidfd whose pidfs identity matched the record", o.Identity.HostPID), nil
}
