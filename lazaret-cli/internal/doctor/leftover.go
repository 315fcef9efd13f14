package doctor

import (
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/paths"
)

// DomainFacts is one Domain as `lazaret-cli status` sees it, plus whether
// its publication files exist at all (an identity file that does not
// verify is still a leftover).
type DomainFacts struct {
	Status         session.DomainStatus
	IdentityPath   string
	SocketPath     string
	IdentityExists bool
	SocketExists   bool
}

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	ID         int
	MountPoint string
	FSType     string
	Source     string
}

// Process is one process of /proc.
type Process struct {
	PID, PPID int
	UID       uint32
	// Exe is the target of /proc/PID/exe without a " (deleted)" suffix.
	Exe     string
	Cmdline []string
}

// Helpers are the Lazaret binaries that run under a coordinator.
var Helpers = []string{"lazaret-supervisor", "lazaret-anchor", "lazaret-gitroute", "lazaret-netsidecar"}

const coordinatorName = "lazaret-coordinator"

// LeftoverInput is what leftover detection looks at.
type LeftoverInput struct {
	RuntimeRoot, StorageRoot string
	// UID is the invoking user: only that user's processes are
	// considered.
	UID       uint32
	Domains   []DomainFacts
	Mounts    []Mount
	Processes []Process
}

// recoverCommand is the command that releases a generation from its
// records: lazaret-cli recover for the profile and workspace the Domain
// Store records (the next start of that profile does the same).
func recoverCommand(st session.DomainStatus) string {
	if st.Profile == "" || st.Workspace == "" {
		return "lazaret-cli recover --profile PROFILE --workspace WORKSPACE   # the Domain's own; its Domain Store is " + shellQuote(st.StorePath)
	}
	return "lazaret-cli recover --profile " + shellQuote(st.Profile) + " --workspace " + shellQuote(st.Workspace)
}

// FindLeftovers returns the leftovers in in, in this order: per Domain (by
// ID) its store and publication, then mounts (deepest first, so the
// commands can be run in order), then processes (by PID).
func FindLeftovers(in LeftoverInput) []Leftover {
	out := []Leftover{}
	live := map[string]bool{}
	for _, d := range in.Domains {
		if d.Status.Lock == session.LockHeld {
			live[d.Status.DomainID] = true
		}
	}
	for _, d := range in.Domains {
		out = append(out, domainLeftovers(d, in.StorageRoot)...)
	}
	out = append(out, mountLeftovers(in, live)...)
	out = append(out, processLeftovers(in)...)
	return out
}

// unfinished lists the participants of the Domain Store that are not
// Clean, as "generation G: Role State" items.
func unfinished(st session.DomainStatus) []string {
	var items []string
	for _, g := range st.Generations {
		for _, p := range g.Participants {
			if p.State != "Clean" {
				items = append(items, fmt.Sprintf("generation %s: %s %s", g.GenerationID, p.Role, p.State))
			}
		}
	}
	return items
}

func domainLeftovers(d DomainFacts, storageRoot string) []Leftover {
	st := d.Status
	if st.Lock == session.LockHeld {
		return nil
	}
	var out []Leftover
	id := st.DomainID
	open := unfinished(st)
	switch st.Store {
	case session.StoreRead:
		if len(open) > 0 {
			out = append(out, Leftover{
				Kind: KindStore, Status: Fail, Domain: id, Path: st.StorePath,
				Summary: fmt.Sprintf("Domain %s has no coordinator, but its Domain Store records participants that are not Clean (%s); the next start of its profile, or this command, releases them",
					id, strings.Join(open, "; ")),
				Command: recoverCommand(st),
			})
		}
	case session.StoreError:
		out = append(out, Leftover{
			Kind: KindStore, Status: Fail, Domain: id, Path: st.StorePath,
			Summary: fmt.Sprintf("the Domain Store %s cannot be read: %s", st.StorePath, st.StoreError),
			Command: fmt.Sprintf("lazaret-cli store quarantine --domain %s --storage-root %s", id, shellQuote(storageRoot)),
		})
	case session.StoreInUse:
		out = append(out, Leftover{
			Kind: KindStore, Status: Warn, Domain: id, Path: st.StorePath,
			Summary: fmt.Sprintf("the Domain Store %s is held open although no coordinator holds the Domain lock; another command may be reading it", st.StorePath),
			Command: "fuser -v " + shellQuote(st.StorePath),
		})
	}
	if !d.IdentityExists && !d.SocketExists {
		return out
	}
	var files []string
	for _, f := range []struct {
		path   string
		exists bool
	}{{d.IdentityPath, d.IdentityExists}, {d.SocketPath, d.SocketExists}} {
		if f.exists {
			files = append(files, shellQuote(f.path))
		}
	}
	l := Leftover{Kind: KindPublication, Domain: id, Path: d.IdentityPath}
	if !d.IdentityExists {
		l.Path = d.SocketPath
	}
	switch {
	case len(open) > 0:
		l.Status = Fail
		l.Summary = fmt.Sprintf("Domain %s is published in %s but no coordinator holds its lock, and its generation needs recovery", id, st.RuntimeDir)
		l.Command = recoverCommand(st)
	case st.Store == session.StoreRead || st.Store == session.StoreMissing:
		l.Status = Warn
		l.Summary = fmt.Sprintf("Domain %s is published in %s but no coordinator holds its lock; the next start of the Domain also removes these files", id, st.RuntimeDir)
		l.Command = "rm -f -- " + strings.Join(files, " ")
	default:
		l.Status = Fail
		l.Summary = fmt.Sprintf("Domain %s is published in %s but no coordinator holds its lock, and its Domain Store cannot be read to tell whether recovery is needed", id, st.RuntimeDir)
		l.Command = recoverCommand(st)
	}
	return append(out, l)
}

// domainOfPath returns the Domain a path under the runtime root
// (domains/<id>/...) or the storage root (state/<id>/..., domains/<id>.db)
// belongs to.
func domainOfPath(p, runtimeRoot, storageRoot string) string {
	for _, base := range []struct{ root, dir string }{{runtimeRoot, "domains"}, {storageRoot, "state"}} {
		if base.root == "" || !paths.Within(p, base.root) {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, base.root), "/")
		parts := strings.SplitN(rel, "/", 3)
		if len(parts) >= 2 && parts[0] == base.dir && isDomainID(parts[1]) {
			return parts[1]
		}
	}
	return ""
}

func isDomainID(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func mountLeftovers(in LeftoverInput, live map[string]bool) []Leftover {
	var ms []Mount
	for _, m := range in.Mounts {
		under := (in.RuntimeRoot != "" && paths.Within(m.MountPoint, in.RuntimeRoot)) ||
			(in.StorageRoot != "" && paths.Within(m.MountPoint, in.StorageRoot))
		if !under || live[domainOfPath(m.MountPoint, in.RuntimeRoot, in.StorageRoot)] {
			continue
		}
		ms = append(ms, m)
	}
	slices.SortStableFunc(ms, func(a, b Mount) int {
		if c := strings.Count(b.MountPoint, "/") - strings.Count(a.MountPoint, "/"); c != 0 {
			return c
		}
		return strings.Compare(a.MountPoint, b.MountPoint)
	})
	var out []Leftover
	for _, m := range ms {
		cmd := "umount " + shellQuote(m.MountPoint)
		if strings.HasPrefix(m.FSType, "fuse") {
			cmd = "fusermount3 -u " + shellQuote(m.MountPoint)
		}
		domain := domainOfPath(m.MountPoint, in.RuntimeRoot, in.StorageRoot)
		owner := "no running Domain"
		if domain != "" {
			owner = "Domain " + domain + ", which has no coordinator"
		}
		out = append(out, Leftover{
			Kind: KindMount, Status: Fail, Domain: domain, Path: m.MountPoint,
			Summary: fmt.Sprintf("%s (%s from %s) is still mounted and belongs to %s", m.MountPoint, m.FSType, m.Source, owner),
			Command: cmd,
		})
	}
	return out
}

// ProcessName returns the base name of an executable path.
func ProcessName(exe string) string { return filepath.Base(exe) }

// RunscRoot returns the value of runsc's global --root flag in a command
// line, or "".
func RunscRoot(cmdline []string) string {
	for i := 1; i < len(cmdline); i++ {
		a := cmdline[i]
		for _, p := range []string{"--root", "-root"} {
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
			if a == p && i+1 < len(cmdline) {
				return cmdline[i+1]
			}
		}
	}
	return ""
}

func processLeftovers(in LeftoverInput) []Leftover {
	byPID := make(map[int]Process, len(in.Processes))
	for _, p := range in.Processes {
		byPID[p.PID] = p
	}
	lazaret := func(p Process) bool {
		n := ProcessName(p.Exe)
		return n == "runsc" || n == coordinatorName || slices.Contains(Helpers, n)
	}
	var out []Leftover
	procs := slices.Clone(in.Processes)
	slices.SortFunc(procs, func(a, b Process) int { return a.PID - b.PID })
	for _, p := range procs {
		name := ProcessName(p.Exe)
		if p.UID != in.UID || name == coordinatorName || !lazaret(p) {
			continue
		}
		root := ""
		if name == "runsc" {
			root = RunscRoot(p.Cmdline)
			if root == "" || !paths.Within(filepath.Clean(root), in.RuntimeRoot) {
				continue
			}
		}
		// Walk up while the ancestors are Lazaret processes; the process
		// is owned when that chain reaches a coordinator, and orphaned
		// when it ends at init (or a subreaper such as systemd), where
		// processes land when their parent dies.
		owned, orphan := false, false
		cur, seen := p, map[int]bool{}
		for !seen[cur.PID] {
			seen[cur.PID] = true
			parent, ok := byPID[cur.PPID]
			if cur.PPID <= 1 || !ok {
				orphan = true
				break
			}
			if ProcessName(parent.Exe) == coordinatorName {
				owned = true
				break
			}
			if !lazaret(parent) {
				orphan = ProcessName(parent.Exe) == "systemd"
				break
			}
			cur = parent
		}
		if owned || !orphan {
			continue
		}
		domain := ""
		if root != "" {
			domain = domainOfPath(filepath.Clean(root), in.RuntimeRoot, in.StorageRoot)
		}
		summary := fmt.Sprintf("%s (pid %d, %s) runs without a coordinator", name, p.PID, p.Exe)
		if root != "" {
			summary += ", with --root=" + root
		}
		out = append(out, Leftover{
			Kind: KindProcess, Status: Fail, Domain: domain, PID: p.PID,
			Summary: summary + "; check that the pid still shows this program before killing it",
			Command: "kill -KILL " + strconv.Itoa(p.PID),
		})
	}
	return out
}

// Errors of the /proc parsers.
var (
	ErrMountinfo = errors.New("malformed mountinfo line")
	ErrStatus    = errors.New("malformed /proc status file")
)

// ParseMountinfoLine parses one line of /proc/PID/mountinfo (proc(5)):
// mount ID, parent ID, major:minor, root, mount point, options, optional
// fields ending with "-", file system type, source, super options. Octal
// escapes (\040 for a space) in paths are decoded.
func ParseMountinfoLine(line string) (Mount, error) {
	f := strings.Fields(line)
	sep := slices.Index(f, "-")
	if len(f) < 10 || sep < 6 || sep+2 >= len(f) {
		return Mount{}, fmt.Errorf("%w: %q", ErrMountinfo, line)
	}
	id, err := strconv.Atoi(f[0])
	if err != nil {
		return Mount{}, fmt.Errorf("%w: mount ID %q", ErrMountinfo, f[0])
	}
	mp, err := unescapeOctal(f[4])
	if err != nil {
		return Mount{}, fmt.Errorf("%w: mount point %q: %w", ErrMountinfo, f[4], err)
	}
	src, err := unescapeOctal(f[sep+2])
	if err != nil {
		return Mount{}, fmt.Errorf("%w: source %q: %w", ErrMountinfo, f[sep+2], err)
	}
	return Mount{ID: id, MountPoint: mp, FSType: f[sep+1], Source: src}, nil
}

// ParseMountinfo parses a whole mountinfo file.
func ParseMountinfo(content string) ([]Mount, error) {
	var out []Mount
	for n, line := range strings.Split(content, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := ParseMountinfoLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 >= len(s) {
			return "", errors.New("truncated escape")
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("escape %q: not three octal digits", s[i:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// ParseStatus reads the parent PID and the real UID from the content of
// /proc/PID/status.
func ParseStatus(content string) (ppid int, uid uint32, err error) {
	var haveP, haveU bool
	for _, line := range strings.Split(content, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		switch key {
		case "PPid":
			if len(fields) != 1 {
				return 0, 0, fmt.Errorf("%w: PPid line %q", ErrStatus, line)
			}
			n, e := strconv.Atoi(fields[0])
			if e != nil || n < 0 {
				return 0, 0, fmt.Errorf("%w: PPid line %q", ErrStatus, line)
			}
			ppid, haveP = n, true
		case "Uid":
			if len(fields) != 4 {
				return 0, 0, fmt.Errorf("%w: Uid line %q", ErrStatus, line)
			}
			n, e := strconv.ParseUint(fields[0], 10, 32)
			if e != nil {
				return 0, 0, fmt.Errorf("%w: Uid line %q", ErrStatus, line)
			}
			uid, haveU = uint32(n), true
		}
	}
	if !haveP || !haveU {
		return 0, 0, fmt.Errorf("%w: no PPid or Uid line", ErrStatus)
	}
	return ppid, uid, nil
}

// ParseCmdline splits the NUL-separated content of /proc/PID/cmdline.
func ParseCmdline(content []byte) []string {
	s := strings.TrimSuffix(string(content), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
