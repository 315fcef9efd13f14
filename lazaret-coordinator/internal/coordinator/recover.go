package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/image/prepare"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/sys"
)

// recoverKillWait bounds the wait for a killed recorded process to exit.
const recoverKillWait = 15 * time.Second

// recoveryOrder is the order in which a recovering coordinator releases an
// earlier generation's participants: the model's RecoverSandbox, then the
// network (RecoverSidecar), then RecoverStateAnchor, with the participants
// the model does not name placed as in the reverse of the start order.
var recoveryOrder = []domainstore.Role{
	domainstore.RolePublication,
	domainstore.RoleSandbox,
	domainstore.RoleHelper,
	domainstore.RoleNetwork,
	domainstore.RoleGitRouting,
	domainstore.RoleStateAnchor,
	domainstore.RolePreparedLower,
}

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
	g := &generation{
		store: st, domain: rec.DomainID, id: rec.GenerationID,
		log:          log.With("recovering", rec.GenerationID.String()),
		participants: map[domainstore.Role]domainstore.Participant{},
		paths:        cp,
		trace:        tr,
	}
	g.dir = filepath.Join(cp.Dir, "gen-"+g.id.String())
	for _, p := range gc.Participants {
		g.participants[p.Role] = p
	}
	r := Recovered{GenerationID: rec.GenerationID, From: rec.DurableDecision}
	tr.recovering(rec.GenerationID, rec.DurableDecision)
	g.log.Warn("recovering a generation an earlier coordinator left", "phase", rec.DurableDecision.String(), "participants", len(gc.Participants))

	switch rec.DurableDecision {
	case domainstore.PhaseStarting, domainstore.PhaseReady, domainstore.PhaseStopping:
		if err := g.setPhase(domainstore.PhaseFailed); err != nil {
			return r, err
		}
		fallthrough
	case domainstore.PhaseFailed:
		var open []ids.SessionID
		for _, s := range gc.Sessions {
			if s.SessionPhase != domainstore.SessionClosed && s.SessionPhase != domainstore.SessionFailed {
				open = append(open, s.SessionID)
			}
		}
		if err := g.closeSessions(open, domainstore.SessionFailed); err != nil {
			return r, fmt.Errorf("recording the sessions of generation %s Failed: %w", g.id, err)
		}
		if err := g.setPhase(domainstore.PhaseRecovering); err != nil {
			return r, err
		}
	}
	for _, role := range recoveryOrder {
		method, err := g.releaseFromRecord(role, storageRoot)
		if err != nil {
			return r, fmt.Errorf("recovering generation %s: %w", g.id, err)
		}
		if method != "" {
			r.Released = append(r.Released, role.String()+": "+method)
		}
		tr.recovered(role)
		if role == domainstore.RoleSandbox {
			// The sessions' guest processes ended with the sandbox; their
			// exec clients are released from their records next.
			for _, t := range gc.Terminals {
				if err := g.releaseTerminalRecord(t); err != nil {
					return r, fmt.Errorf("recovering generation %s: %w", g.id, err)
				}
			}
		}
	}
	if err := g.setPhase(domainstore.PhaseAbsent); err != nil {
		return r, err
	}
	if err := g.finish(); err != nil {
		return r, err
	}
	tr.finishRecovery()
	return r, nil
}

// releaseFromRecord releases role's participant, unless it is absent or
// Clean, from its record alone: ReleaseIntent, the release, then Clean
// with how. It returns how, or "" when there was nothing to release.
func (g *generation) releaseFromRecord(role domainstore.Role, storageRoot string) (string, error) {
	p, ok := g.current(role)
	if !ok || p.State == domainstore.StateClean {
		return "", nil
	}
	if err := g.releaseIntent(role, recordReleaseIntent); err != nil {
		return "", err
	}
	p, _ = g.current(role)
	method, err := g.recoverParticipant(p, storageRoot)
	if err != nil {
		return "", fmt.Errorf("releasing the %v participant from its record: %w", role, err)
	}
	return method, g.clean(role, method)
}

// releaseTerminalRecord releases a session terminal an earlier coordinator
// left, from its record alone: its exec client killed through its
// recorded pidfs identity (its guest process ended with the sandbox,
// released before), ReleaseIntent, then Clean with that proof.
func (g *generation) releaseTerminalRecord(t domainstore.SessionTerminal) error {
	if t.State == domainstore.TerminalClean {
		return nil
	}
	how, err := g.killRecorded("session exec client", t.ExecClient)
	if err != nil {
		return fmt.Errorf("releasing the terminal of session %s: %w", t.SessionID, err)
	}
	if t.State != domainstore.TerminalReleaseIntent && !t.Bare() {
		ri := t
		ri.State = domainstore.TerminalReleaseIntent
		if err := g.store.Update(func(tx *domainstore.Tx) error { return tx.PutTerminal(ri, nil) }); err != nil {
			return fmt.Errorf("recording the terminal of session %s ReleaseIntent: %w", t.SessionID, err)
		}
	}
	clean := domainstore.SessionTerminal{GenerationID: t.GenerationID, SessionID: t.SessionID, State: domainstore.TerminalClean}
	proof := store.ProvenAbsent("exec client " + how + "; its guest process ended with the released sandbox")
	if err := g.store.Update(func(tx *domainstore.Tx) error { return tx.PutTerminal(clean, proof) }); err != nil {
		return fmt.Errorf("recording the terminal of session %s Clean: %w", t.SessionID, err)
	}
	g.log.Info("released a session terminal from its record", "session", t.SessionID.String(), "exec_client", how)
	return nil
}

// recordReleaseIntent moves the phases inside a record along with its
// participant's ReleaseIntent, as the store's guard requires.
func recordReleaseIntent(o *domainstore.ParticipantOwnership) {
	if o.PreparedLower != nil && o.PreparedLower.LeaseState != nil {
		o.PreparedLower.LeaseState = ptr(domainstore.LeaseReleaseIntent)
	}
}

// recoverParticipant releases p using only its record and returns how.
func (g *generation) recoverParticipant(p domainstore.Participant, storageRoot string) (string, error) {
	o := p.Ownership
	if o == nil {
		return "nothing was acquired (bare Intent)", nil
	}
	switch {
	case o.Publication != nil:
		var errs []error
		for _, f := range []struct {
			path *string
			id   *hostid.MountIdentity
		}{
			{o.Publication.IdentityPath, o.Publication.IdentityFileIdentity},
			{o.Publication.SocketPath, o.Publication.SocketIdentity},
			{o.Publication.StagedIdentityPath, o.Publication.IdentityFileIdentity},
			{o.Publication.StagedSocketPath, o.Publication.SocketIdentity},
		} {
			if f.path != nil && f.id != nil {
				errs = append(errs, control.WithdrawFile(*f.path, *f.id))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return "", err
		}
		return "identity file and socket removed where their mount ID, device and inode matched the record", nil
	case o.Sandbox != nil:
		// The attached runsc first: the sandbox and gofer run --attached
		// and die with it; then its Runtime Supervisor.
		a, err := g.killRecorded("attached runsc", o.Sandbox.AttachedRunsc)
		if err != nil {
			return "", err
		}
		s, err := g.killRecorded("runtime supervisor", o.Sandbox.RuntimeSupervisor)
		if err != nil {
			return "", err
		}
		return "attached runsc " + a + "; runtime supervisor " + s, nil
	case o.Helper != nil:
		h, err := g.killRecorded("connectivity helper", o.Helper.ConnectivityHelper)
		if err != nil {
			return "", err
		}
		return "connectivity helper " + h, nil
	case o.Network != nil:
		if o.Network.Namespace != nil {
			if pid, ok := processInNamespace("net", *o.Network.Namespace); ok {
				return "", fmt.Errorf("process %d is still in the recorded enforcement namespace %v, and no record identifies it; stop it, then run recovery again", pid, *o.Network.Namespace)
			}
		}
		if err := os.Remove(filepath.Join(g.paths.Dir, control.NetworkPolicyName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("removing the network policy file: %w", err)
		}
		return "no process is in the recorded enforcement namespace (the network sidecar exits when its coordinator's channel ends)", nil
	case o.GitRouting != nil:
		d, err := g.killRecorded("git routing daemon", o.GitRouting.Daemon)
		if err != nil {
			return "", err
		}
		if o.GitRouting.Mount != nil && o.GitRouting.Mountpoint != nil {
			if err := unmountRecorded(*o.GitRouting.Mountpoint, *o.GitRouting.Mount); err != nil {
				return "", err
			}
		}
		return "git routing daemon " + d + "; its view is not mounted in this namespace", nil
	case o.StateAnchor != nil:
		a, err := g.killRecorded("state anchor", o.StateAnchor.Daemon)
		if err != nil {
			return "", err
		}
		return "state anchor " + a + "; its overlay lived in its own mount namespace, which ended with it", nil
	case o.PreparedLower != nil:
		pl := o.PreparedLower
		if pl.PreparedArtifactID == nil || pl.LeaseState == nil {
			return "no lease was taken", nil
		}
		prep := &prepare.Preparer{Root: storageRoot, Log: g.log}
		err := prep.Release(catalog.ArtifactLease{PreparedArtifactID: *pl.PreparedArtifactID, DomainID: g.domain, GenerationID: g.id})
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "the catalog holds no lease for this generation any more", nil
		case err != nil:
			return "", fmt.Errorf("releasing the lease on prepared artifact %s: %w", *pl.PreparedArtifactID, err)
		}
		return "catalog lease removed in the same catalog transaction that checked it", nil
	}
	return "nothing was acquired", nil
}

// killRecorded kills the process o records when, and only when, a pidfd
// opened on its PID shows the recorded pidfs identity, and waits for it
// to exit. It says what it found.
func (g *generation) killRecorded(what string, o hostid.PersistedHostProcessOwnership) (string, error) {
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
	g.log.Info("killed a recorded process", "what", what, "pid", o.Identity.HostPID)
	return fmt.Sprintf("(pid %d) killed through a pidfd whose pidfs identity matched the record", o.Identity.HostPID), nil
}

// unmountRecorded detaches the mount at mountpoint when it is still the
// recorded one in this mount namespace.
func unmountRecorded(mountpoint string, want hostid.MountIdentity) error {
	fd, err := unix.Open(mountpoint, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTCONN) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening the recorded mountpoint %q: %w", mountpoint, err)
	}
	got, err := hostid.MountOf(fd)
	unix.Close(fd)
	if err != nil || got != want {
		return nil // not the recorded mount (or none): nothing of ours is there
	}
	if os.Geteuid() == 0 {
		if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting the recorded view %q: %w", mountpoint, err)
		}
		return nil
	}
	if out, err := exec.Command("fusermount3", "-u", "-z", "--", mountpoint).CombinedOutput(); err != nil {
		return fmt.Errorf("fusermount3 -u -z %q: %v: %s", mountpoint, err, out)
	}
	return nil
}

// processInNamespace returns a process in the namespace want, if any.
func processInNamespace(kind string, want hostid.NamespaceIdentity) (int, bool) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if ns, err := hostid.NamespaceOfProcess(pid, kind); err == nil && ns == want {
			return pid, true
		}
	}
	return 0, false
}
