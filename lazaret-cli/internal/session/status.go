package session

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/audit"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/pinresolver"
	"lazaret.dev/pkg/store"
)

// Lock states of a Domain.
const (
	LockAbsent = "absent" // no lock file: never started under this runtime root
	LockFree   = "free"   // nobody holds it: no coordinator runs
	LockHeld   = "held"   // a coordinator (or a starting CLI) holds it
)

// Store states of a Domain.
const (
	StoreRead    = "read"    // read read-only; the records below are complete
	StoreMissing = "missing" // no Domain Store under the storage root
	StoreInUse   = "in-use"  // a running coordinator holds it open
	StoreError   = "error"   // it could not be read; see error
)

// DomainStatus is what `lazaret-cli status` shows for one Domain.
type DomainStatus struct {
	DomainID         string             `json:"domain_id"`
	Profile          string             `json:"profile,omitempty"`
	Workspace        string             `json:"workspace,omitempty"`
	RuntimeDir       string             `json:"runtime_dir"`
	Lock             string             `json:"lock"`
	CoordinatorPIDs  []int              `json:"coordinator_pids"`
	Published        *PublishedStatus   `json:"published"`
	StorePath        string             `json:"store_path"`
	Store            string             `json:"store"`
	StoreError       string             `json:"store_error,omitempty"`
	Generations      []GenerationStatus `json:"generations"`
	CoordinatorLog   string             `json:"coordinator_log,omitempty"`
	PublicationError string             `json:"publication_error,omitempty"`
	Network          *NetworkStatus     `json:"network,omitempty"`
	NetworkError     string             `json:"network_error,omitempty"`
	// Ports are the published ports the running generation recorded.
	Ports      []PortStatus `json:"published_ports,omitempty"`
	PortsError string       `json:"published_ports_error,omitempty"`
	// AuditLog is the Domain's escalation audit log, when it exists;
	// Audit is AuditAccepting or AuditRefusing, and AuditError says why
	// it refuses.
	AuditLog   string `json:"audit_log,omitempty"`
	Audit      string `json:"audit,omitempty"`
	AuditError string `json:"audit_error,omitempty"`
}

// Audit log states of a Domain.
const (
	AuditAccepting = "accepting" // escalation requests can be admitted
	AuditRefusing  = "refusing"  // its file system lacks the space a request needs
)

// NetworkStatus is the effective network policy the running generation
// enforces, from its network-policy file.
type NetworkStatus struct {
	PolicyDigest string   `json:"policy_digest"`
	IPv4         string   `json:"ipv4"`
	IPv6         string   `json:"ipv6"`
	Allow        []string `json:"allow"`
	Deny         []string `json:"deny"`
	Resolvers    []string `json:"resolvers"`
	// The fields below are set for a policy with host names only.
	AllowHosts   []string     `json:"allow_hosts,omitempty"`
	DenyHosts    []string     `json:"deny_hosts,omitempty"`
	NameUpstream string       `json:"name_upstream,omitempty"`
	Pins         []PinStatus  `json:"pins,omitempty"`
	Refusals     []NameStatus `json:"refusals,omitempty"`
	NameLog      string       `json:"name_log,omitempty"`
	NameLogError string       `json:"name_log_error,omitempty"`
	// Credentials are the credentials the broker holds (names and
	// destinations only); CredentialsError says why the record could
	// not be read.
	Credentials      []control.BrokeredCredential `json:"credentials,omitempty"`
	CredentialsError string                       `json:"credentials_error,omitempty"`
}

// PinStatus is an address the pinning resolver admitted, the names that
// resolved to it, and how long its pin lasts. Names are sandbox data,
// escaped (pinresolver.EscapeName).
type PinStatus struct {
	Address          string   `json:"address"`
	Names            []string `json:"names"`
	RemainingSeconds float64  `json:"remaining_seconds"`
}

// NameStatus is one refusal of the pinning resolver: a name outside the
// allowlist ("refused") or an address a name answered that the static
// policy denies ("rebinding").
type NameStatus struct {
	Time   string `json:"time"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
}

// printable is s with every rune outside printable ASCII escaped, quotes
// removed: a reason names policy rules and addresses, but nothing from a
// log reaches a terminal unescaped.
func printable(s string) string {
	q := strconv.QuoteToASCII(s)
	return q[1 : len(q)-1]
}

// RecentRefusals is how many refusals status shows.
const RecentRefusals = 10

// nameStatus adds the name rules and what the name log says to n.
func nameStatus(n *NetworkStatus, p *netpolicy.DerivedNetworkPolicy, dir string, now time.Time, refusals int) {
	if !p.HasNames() {
		return
	}
	for _, r := range p.NameRules {
		if r.Action == netpolicy.Allow {
			n.AllowHosts = append(n.AllowHosts, r.Pattern)
		} else {
			n.DenyHosts = append(n.DenyHosts, r.Pattern)
		}
	}
	n.NameUpstream = p.NameUpstream.String()
	if len(p.Brokered) > 0 {
		creds, err := control.ReadBrokeredCredentials(dir)
		if err != nil {
			n.CredentialsError = err.Error()
		}
		n.Credentials = creds
	}
	n.NameLog = control.NameLogPath(dir)
	sum, err := netsidecar.ReadNameLog(n.NameLog, now, refusals)
	if err != nil {
		n.NameLogError = err.Error()
		return
	}
	for _, pin := range sum.Pins {
		ps := PinStatus{Address: pin.Address.String(), Names: []string{}, RemainingSeconds: pin.Expires.Sub(now).Round(100 * time.Millisecond).Seconds()}
		for _, name := range pin.Names {
			ps.Names = append(ps.Names, pinresolver.EscapeName(name))
		}
		n.Pins = append(n.Pins, ps)
	}
	for _, r := range sum.Refusals {
		name := pinresolver.EscapeName(r.Name)
		if r.Port != 0 {
			name += ":" + strconv.Itoa(int(r.Port))
		}
		n.Refusals = append(n.Refusals, NameStatus{Time: r.Time.UTC().Format(time.RFC3339), Kind: r.Kind,
			Name: name, Reason: printable(r.Reason)})
	}
}

func networkStatus(p *netpolicy.DerivedNetworkPolicy, digest ids.Digest) *NetworkStatus {
	n := &NetworkStatus{PolicyDigest: digest.String(), IPv4: "disabled", IPv6: "disabled",
		Allow: []string{}, Deny: []string{}, Resolvers: []string{}}
	for _, f := range p.AddressFamilies {
		switch f.Family {
		case netpolicy.IPv4:
			n.IPv4 = f.Disposition.String()
		case netpolicy.IPv6:
			n.IPv6 = f.Disposition.String()
		}
	}
	for _, r := range p.PrefixRules {
		if r.Action == netpolicy.Allow {
			n.Allow = append(n.Allow, r.Network.String())
		} else {
			n.Deny = append(n.Deny, r.Network.String())
		}
	}
	for _, r := range p.Resolvers {
		n.Resolvers = append(n.Resolvers, r.Address.String())
	}
	return n
}

// PortStatus is one published port: TCP to Host on the host reaches
// SandboxPort in the sandbox.
type PortStatus struct {
	Host        string `json:"host"`
	SandboxPort uint16 `json:"sandbox_port"`
}

// PublishedStatus is the verified identity file of a Ready Domain.
type PublishedStatus struct {
	GenerationID string `json:"generation_id"`
	Profile      string `json:"profile"`
	Fingerprint  string `json:"configuration_fingerprint"`
}

// GenerationStatus is one generation recorded in the Domain Store.
type GenerationStatus struct {
	GenerationID string              `json:"generation_id"`
	Fingerprint  string              `json:"configuration_fingerprint"`
	Phase        string              `json:"phase"`
	Participants []ParticipantStatus `json:"participants"`
	Sessions     []SessionStatus     `json:"sessions"`
}

// ParticipantStatus is one participant's role and state.
type ParticipantStatus struct {
	Role  string `json:"role"`
	State string `json:"state"`
}

// SessionStatus is one session and its terminal's state.
type SessionStatus struct {
	SessionID string `json:"session_id"`
	CLIID     string `json:"cli_id"`
	Phase     string `json:"phase"`
	Terminal  string `json:"terminal,omitempty"`
}

// storeReadTimeout bounds the wait for a Domain Store's file lock: a
// running coordinator holds it, and status must not hang on it.
const storeReadTimeout = 200 * time.Millisecond

// Status lists every Domain found under the runtime root (a directory
// domains/<hex>/) or the storage root (a Domain Store domains/<hex>.db),
// sorted by Domain ID. It changes nothing: the lock state comes from
// /proc/locks, the publication from the identity file, the records from
// a read-only open of the Domain Store.
func Status(runtimeRoot, storageRoot string) ([]DomainStatus, error) {
	found := map[string]bool{}
	for _, dir := range []struct{ path, suffix string }{
		{filepath.Join(runtimeRoot, control.DomainsDirName), ""},
		{filepath.Join(storageRoot, "domains"), ".db"},
	} {
		entries, err := os.ReadDir(dir.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing Domains: %w", err)
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), dir.suffix)
			if !ok || (dir.suffix == "") != e.IsDir() {
				continue
			}
			if _, err := parseDomain(name); err == nil {
				found[name] = true
			}
		}
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	locks, _ := readProcLocks()
	out := make([]DomainStatus, 0, len(names))
	for _, n := range names {
		id, _ := parseDomain(n)
		out = append(out, domainStatus(runtimeRoot, storageRoot, id, locks))
	}
	return out, nil
}

func parseDomain(s string) (ids.DomainID, error) {
	var id ids.DomainID
	if len(s) != 2*len(id) || strings.ToLower(s) != s {
		return id, errors.New("not a Domain ID")
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err
}

func domainStatus(runtimeRoot, storageRoot string, id ids.DomainID, locks map[lockKey]bool) DomainStatus {
	p := control.DomainPaths(runtimeRoot, id)
	st := DomainStatus{
		DomainID:        id.String(),
		RuntimeDir:      p.Dir,
		Lock:            LockAbsent,
		CoordinatorPIDs: []int{},
		StorePath:       domainstore.Path(storageRoot, id),
		Generations:     []GenerationStatus{},
	}
	lockPath := filepath.Join(p.Dir, LockName)
	var lst unix.Stat_t
	if err := unix.Stat(lockPath, &lst); err == nil {
		st.Lock = LockFree
		key := lockKey{major: unix.Major(lst.Dev), minor: unix.Minor(lst.Dev), ino: lst.Ino}
		if locks[key] {
			st.Lock = LockHeld
			st.CoordinatorPIDs = holders(lst.Dev, lst.Ino)
			if len(st.CoordinatorPIDs) == 0 {
				st.CoordinatorPIDs = recordedHolder(p.Dir)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(p.Dir, LogName)); err == nil {
		st.CoordinatorLog = filepath.Join(p.Dir, LogName)
	}
	if pub, _, err := control.ReadIdentityFile(p.Identity); err == nil {
		g := pub.GenerationIdentity
		st.Published = &PublishedStatus{GenerationID: g.GenerationID.String(), Profile: g.AgentProfile, Fingerprint: g.ConfigurationFingerprint.String()}
		st.Profile = g.AgentProfile
	} else if !errors.Is(err, fs.ErrNotExist) {
		st.PublicationError = err.Error()
	}
	if pol, digest, err := control.ReadNetworkPolicy(p.Dir); err == nil {
		st.Network = networkStatus(pol, digest)
		nameStatus(st.Network, pol, p.Dir, time.Now(), RecentRefusals)
	} else if !errors.Is(err, fs.ErrNotExist) {
		st.NetworkError = err.Error()
	}
	if ports, err := control.ReadPublishedPorts(p.Dir); err == nil {
		for _, f := range ports {
			st.Ports = append(st.Ports, PortStatus{Host: f.Host(), SandboxPort: f.SandboxPort})
		}
	} else {
		st.PortsError = err.Error()
	}
	if ap := audit.Path(storageRoot, id); fileExists(ap) {
		st.AuditLog, st.Audit = ap, AuditAccepting
		if err := audit.CheckSpace(ap); err != nil {
			st.Audit, st.AuditError = AuditRefusing, strings.TrimPrefix(err.Error(), fmt.Sprintf("audit log %q: ", ap))
		}
		// The running coordinator's own word, when it refuses for another
		// reason too (a write that failed stops the log); a file left by a
		// coordinator that was killed says nothing.
		if b, err := os.ReadFile(filepath.Join(p.Dir, audit.RefusingName)); err == nil && len(b) > 0 && st.Lock == LockHeld {
			st.Audit = AuditRefusing
			st.AuditError = strings.TrimPrefix(strings.TrimSpace(string(b[:min(len(b), 4096)])), fmt.Sprintf("audit log %q: ", ap))
		}
	}
	s, err := domainstore.OpenFile(st.StorePath, domainstore.Options{ReadOnly: true, LockTimeout: storeReadTimeout})
	switch {
	case errors.Is(err, store.ErrNotFound):
		st.Store = StoreMissing
		return st
	case errors.Is(err, store.ErrLocked):
		st.Store = StoreInUse
		return st
	case err != nil:
		st.Store, st.StoreError = StoreError, err.Error()
		return st
	}
	defer s.Close()
	var c domainstore.Contents
	if err := s.View(func(tx *domainstore.Tx) error { var e error; c, e = tx.Scan(); return e }); err != nil {
		st.Store, st.StoreError = StoreError, err.Error()
		return st
	}
	st.Store = StoreRead
	st.Profile, st.Workspace = c.Domain.ProfileName, c.Domain.CanonicalWorkspace
	for _, g := range c.Generations {
		gs := GenerationStatus{
			GenerationID: g.Generation.GenerationID.String(),
			Fingerprint:  g.Generation.ConfigurationFingerprint.String(),
			Phase:        g.Generation.DurableDecision.String(),
			Participants: []ParticipantStatus{},
			Sessions:     []SessionStatus{},
		}
		for _, pt := range g.Participants {
			gs.Participants = append(gs.Participants, ParticipantStatus{Role: pt.Role.String(), State: pt.State.String()})
		}
		terms := map[ids.SessionID]string{}
		for _, t := range g.Terminals {
			terms[t.SessionID] = t.State.String()
		}
		for _, ss := range g.Sessions {
			gs.Sessions = append(gs.Sessions, SessionStatus{SessionID: ss.SessionID.String(), CLIID: ss.CLIID.String(), Phase: ss.SessionPhase.String(), Terminal: terms[ss.SessionID]})
		}
		st.Generations = append(st.Generations, gs)
	}
	return st
}

type lockKey struct {
	major, minor uint32
	ino          uint64
}

// readProcLocks returns the files that have a flock held on them:
// "N: FLOCK ADVISORY WRITE pid MAJ:MIN:INODE start end" lines.
func readProcLocks() (map[lockKey]bool, error) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[lockKey]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, ok := parseLockLine(sc.Text()); ok {
			out[k] = true
		}
	}
	return out, sc.Err()
}

// parseLockLine parses one /proc/locks line describing a flock; blocked
// waiters ("->") are not holders.
func parseLockLine(line string) (lockKey, bool) {
	f := strings.Fields(line)
	if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" {
		return lockKey{}, false
	}
	parts := strings.Split(f[5], ":")
	if len(parts) != 3 {
		return lockKey{}, false
	}
	maj, err1 := strconv.ParseUint(parts[0], 16, 32)
	min, err2 := strconv.ParseUint(parts[1], 16, 32)
	ino, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return lockKey{}, false
	}
	return lockKey{major: uint32(maj), minor: uint32(min), ino: ino}, true
}

// recordedHolder returns the coordinator recorded in the Domain's runtime
// directory when a pidfd proves it is that exact live process. It is how an
// unprivileged CLI finds the holder: the coordinator is non-dumpable, so
// its /proc/PID/fd cannot be read by the same user.
func recordedHolder(dir string) []int {
	fd, id, err := control.RecordedCoordinator(dir)
	if err != nil {
		return []int{}
	}
	unix.Close(fd)
	return []int{int(id.HostPID)}
}

// holders lists the processes of this user running lazaret-coordinator
// with a descriptor on the lock file (dev, ino). /proc/locks names the
// process that took a flock, which for a Domain lock is the CLI that
// spawned the coordinator, so descriptors are what identify the holder.
func holders(dev, ino uint64) []int {
	pids := []int{}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return pids
	}
	for _, pe := range procs {
		pid, err := strconv.Atoi(pe.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", pe.Name(), "exe"))
		if err != nil || !strings.HasPrefix(filepath.Base(exe), "lazaret-coordinator") {
			continue
		}
		fdDir := filepath.Join("/proc", pe.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fe := range fds {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(fdDir, fe.Name()), &st) == nil && st.Dev == dev && st.Ino == ino {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
