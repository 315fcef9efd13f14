package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/ids"
)

func TestParseMountinfoLine(t *testing.T) {
	tests := []struct {
		line string
		want Mount
		ok   bool
	}{
		{"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue", Mount{36, "/mnt2", "ext3", "/dev/root"}, true},
		{"501 30 0:55 / /run/user/1000/lazaret/domains/ab/gen-1/view rw,nosuid,nodev - fuse.lazaret-gitroute lazaret-workspace rw,user_id=1000", Mount{501, "/run/user/1000/lazaret/domains/ab/gen-1/view", "fuse.lazaret-gitroute", "lazaret-workspace"}, true},
		{`77 30 0:4 / /tmp/a\040b rw shared:3 shared:9 - nsfs nsfs rw`, Mount{77, "/tmp/a b", "nsfs", "nsfs"}, true},
		{"22 26 0:21 / /sys rw,relatime - sysfs sysfs rw", Mount{22, "/sys", "sysfs", "sysfs"}, true},
		{"x 26 0:21 / /sys rw - sysfs sysfs rw", Mount{}, false},
		{"22 26 0:21 / /sys rw sysfs sysfs rw", Mount{}, false},
		{`22 26 0:21 / /s\04 rw - sysfs sysfs rw`, Mount{}, false},
		{`22 26 0:21 / /s\999 rw - sysfs sysfs rw`, Mount{}, false},
		{"22 26 0:21 / /sys rw -", Mount{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := ParseMountinfoLine(tt.line)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v ok=%v", got, err, tt.want, tt.ok)
			}
			if !tt.ok && !errors.Is(err, ErrMountinfo) {
				t.Fatalf("error %v is not ErrMountinfo", err)
			}
		})
	}
	ms, err := ParseMountinfo("22 26 0:21 / /sys rw - sysfs sysfs rw\n\n23 26 0:6 / /dev rw - devtmpfs devtmpfs rw\n")
	if err != nil || len(ms) != 2 || ms[1].MountPoint != "/dev" {
		t.Fatalf("%+v %v", ms, err)
	}
	if _, err := ParseMountinfo("22 26\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("error %v does not name the line", err)
	}
}

func FuzzParseMountinfoLine(f *testing.F) {
	f.Add("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue")
	f.Add(`77 30 0:4 / /tmp/a\040b rw - nsfs nsfs rw`)
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseMountinfoLine(line)
		if err == nil && (m.FSType == "" || m.MountPoint == "") {
			t.Fatalf("%q accepted as %+v", line, m)
		}
	})
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name, in string
		ppid     int
		uid      uint32
		ok       bool
	}{
		{"normal", "Name:\tx\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\n", 1, 1000, true},
		{"missing uid", "PPid:\t1\n", 0, 0, false},
		{"bad ppid", "PPid:\tx\nUid:\t1 1 1 1\n", 0, 0, false},
		{"short uid", "PPid:\t4\nUid:\t1 1\n", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, u, err := ParseStatus(tt.in)
			if (err == nil) != tt.ok || p != tt.ppid || u != tt.uid {
				t.Fatalf("got %d %d %v", p, u, err)
			}
		})
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add("PPid:\t1\nUid:\t1000\t1000\t1000\t1000\n")
	f.Fuzz(func(t *testing.T, s string) {
		if p, _, err := ParseStatus(s); err == nil && p < 0 {
			t.Fatalf("%q: ppid %d", s, p)
		}
	})
}

func TestParseCmdlineAndRunscRoot(t *testing.T) {
	cl := ParseCmdline([]byte("runsc\x00--root=/r/domains/x/runsc\x00run\x00id\x00"))
	if !slices.Equal(cl, []string{"runsc", "--root=/r/domains/x/runsc", "run", "id"}) {
		t.Fatalf("%q", cl)
	}
	if ParseCmdline(nil) != nil {
		t.Fatal("empty cmdline")
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"runsc", "--root=/a", "run"}, "/a"},
		{[]string{"runsc", "--root", "/b", "run"}, "/b"},
		{[]string{"runsc", "-root=/c"}, "/c"},
		{[]string{"runsc", "run", "--root"}, ""},
		{[]string{"runsc", "run"}, ""},
	} {
		if got := RunscRoot(tt.args); got != tt.want {
			t.Errorf("RunscRoot(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

const (
	idA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	idC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func domain(id, lock, store string, identity bool, states ...string) DomainFacts {
	st := session.DomainStatus{DomainID: id, Lock: lock, Store: store, RuntimeDir: "/r/domains/" + id, StorePath: "/s/domains/" + id + ".db"}
	if store == session.StoreError {
		st.StoreError = "damaged page"
	}
	if len(states) > 0 {
		g := session.GenerationStatus{GenerationID: "9e"}
		for _, s := range states {
			g.Participants = append(g.Participants, session.ParticipantStatus{Role: "Sandbox", State: s})
		}
		st.Generations = append(st.Generations, g)
	}
	return DomainFacts{Status: st, IdentityPath: st.RuntimeDir + "/identity", SocketPath: st.RuntimeDir + "/control.sock", IdentityExists: identity, SocketExists: identity}
}

// recoverUnknown is the recover command for a Domain whose profile and
// workspace are not known (the fixture's statuses name none).
const recoverUnknown = "lazaret-cli recover --profile PROFILE --workspace WORKSPACE   # the Domain's own; its Domain Store is /s/domains/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.db"

func TestFindLeftovers(t *testing.T) {
	type want struct {
		kind    string
		status  Status
		command string
	}
	tests := []struct {
		name string
		in   LeftoverInput
		want []want
	}{
		{"nothing", LeftoverInput{}, nil},
		{"running Domain", LeftoverInput{Domains: []DomainFacts{domain(idA, session.LockHeld, session.StoreInUse, true)}}, nil},
		{"finished Domain", LeftoverInput{Domains: []DomainFacts{domain(idA, session.LockFree, session.StoreRead, false, "Clean", "Clean")}}, nil},
		{"stale publication, clean store", LeftoverInput{Domains: []DomainFacts{domain(idA, session.LockFree, session.StoreRead, true, "Clean")}},
			[]want{{KindPublication, Warn, "rm -f -- /r/domains/" + idA + "/identity /r/domains/" + idA + "/control.sock"}}},
		{"stale publication, no store", LeftoverInput{Domains: []DomainFacts{domain(idA, session.LockAbsent, session.StoreMissing, true)}},
			[]want{{KindPublication, Warn, "rm -f -- /r/domains/" + idA + "/identity /r/domains/" + idA + "/control.sock"}}},
		{"stale publication, unfinished generation", LeftoverInput{Domains: []DomainFacts{domain(idA, session.LockFree, session.StoreRead, true, "Committed")}},
			[]want{{KindStore, Fail, recoverUnknown}, {KindPublication, Fail, recoverUnknown}}},
		{"unfinished generation only", LeftoverInput{Domains: []DomainFacts{domain(idA, session.LockFree, session.StoreRead, false, "Clean", "Intent")}},
			[]want{{KindStore, Fail, recoverUnknown}}},
		{"damaged store", LeftoverInput{StorageRoot: "/s", Domains: []DomainFacts{domain(idA, session.LockFree, session.StoreError, true)}},
			[]want{{KindStore, Fail, "lazaret-cli store quarantine --domain " + idA + " --storage-root /s"}, {KindPublication, Fail, recoverUnknown}}},
		{"store held without lock", LeftoverInput{Domains: []DomainFacts{domain(idA, session.LockFree, session.StoreInUse, false)}},
			[]want{{KindStore, Warn, "fuser -v /s/domains/" + idA + ".db"}}},
		{"mounts", LeftoverInput{RuntimeRoot: "/r", StorageRoot: "/s",
			Domains: []DomainFacts{domain(idA, session.LockHeld, session.StoreInUse, true), domain(idB, session.LockFree, session.StoreMissing, false)},
			Mounts: []Mount{
				{1, "/", "ext4", "/dev/vda"},
				{2, "/r/domains/" + idA + "/gen-1/view", "fuse.lazaret-gitroute", "lazaret-workspace"},
				{3, "/r/domains/" + idB + "/gen-1/view", "fuse.lazaret-gitroute", "lazaret-workspace"},
				{4, "/r/domains/" + idB + "/gen-1/runsc/null-netns", "nsfs", "nsfs"},
				{5, "/s/state/" + idB, "tmpfs", "tmpfs"},
				{6, "/rx/domains", "tmpfs", "tmpfs"},
			}},
			[]want{
				{KindMount, Fail, "umount /r/domains/" + idB + "/gen-1/runsc/null-netns"},
				{KindMount, Fail, "fusermount3 -u /r/domains/" + idB + "/gen-1/view"},
				{KindMount, Fail, "umount /s/state/" + idB},
			}},
		{"processes", LeftoverInput{RuntimeRoot: "/r", UID: 1000, Processes: []Process{
			{PID: 10, PPID: 1, UID: 1000, Exe: "/usr/libexec/lazaret/lazaret-coordinator"},
			{PID: 11, PPID: 10, UID: 1000, Exe: "/usr/libexec/lazaret/lazaret-supervisor"},
			{PID: 12, PPID: 11, UID: 1000, Exe: "/usr/libexec/lazaret/runsc", Cmdline: []string{"runsc", "--root=/r/domains/" + idC + "/gen-1/runsc", "run"}},
			{PID: 20, PPID: 1, UID: 1000, Exe: "/usr/libexec/lazaret/lazaret-supervisor"},
			{PID: 21, PPID: 20, UID: 1000, Exe: "/usr/libexec/lazaret/runsc", Cmdline: []string{"runsc", "--root=/r/domains/" + idC + "/gen-2/runsc", "run"}},
			{PID: 30, PPID: 5, UID: 1000, Exe: "/usr/lib/systemd/systemd"},
			{PID: 31, PPID: 30, UID: 1000, Exe: "/opt/lazaret/lazaret-anchor"},
			{PID: 40, PPID: 1, UID: 1000, Exe: "/usr/bin/runsc", Cmdline: []string{"runsc", "--root=/var/run/docker-runsc", "run"}},
			{PID: 50, PPID: 1, UID: 2000, Exe: "/usr/libexec/lazaret/lazaret-gitroute"},
			{PID: 60, PPID: 55, UID: 1000, Exe: "/home/u/src/sidecar.test"},
			{PID: 61, PPID: 60, UID: 1000, Exe: "/usr/libexec/lazaret/lazaret-netsidecar"},
			{PID: 70, PPID: 1, UID: 1000, Exe: "/usr/bin/sleep"},
		}},
			[]want{{KindProcess, Fail, "kill -KILL 20"}, {KindProcess, Fail, "kill -KILL 21"}, {KindProcess, Fail, "kill -KILL 31"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FindLeftovers(tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("%d leftovers, want %d:\n%+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Kind != w.kind || g.Status != w.status || g.Command != w.command || g.Summary == "" {
					t.Errorf("leftover %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestScanLeftoversFabricated builds a runtime root with a Domain whose
// lock is free but whose identity file is still there, and a storage root
// whose Domain Store records a participant in Intent, then scans them.
func TestScanLeftoversFabricated(t *testing.T) {
	runtime, storage := t.TempDir(), t.TempDir()
	stale := ids.DomainID{0xd0, 0x01}
	clean := ids.DomainID{0xd0, 0x02}

	for _, d := range []ids.DomainID{stale, clean} {
		p := control.DomainPaths(runtime, d)
		if err := os.MkdirAll(p.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.Dir, session.LockName), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p.Identity, []byte("left by a generation that crashed"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := domainstore.Create(storage, domainstore.Domain{DomainID: stale, ProfileName: "dev", CanonicalWorkspace: "/home/u/src"}, domainstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gen := ids.GenerationID{0x9e}
	err = s.Update(func(tx *domainstore.Tx) error {
		if err := tx.PutGeneration(domainstore.Generation{
			DomainID: stale, GenerationID: gen, ConfigurationFingerprint: ids.Digest{0xcf},
			CoordinatorID: ids.CoordinatorID{0xc0}, NetworkSidecarID: ids.SidecarID{0x5c}, SandboxID: ids.SandboxID{0x5b},
			DurableDecision: domainstore.PhaseStarting,
		}); err != nil {
			return err
		}
		return tx.PutParticipant(domainstore.Participant{GenerationID: gen, Role: domainstore.RoleSandbox, State: domainstore.StateIntent}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	got, err := ScanLeftovers(runtime, storage, uint32(os.Getuid()))
	if err != nil {
		t.Fatal(err)
	}
	var mine []Leftover
	for _, l := range got {
		if l.Kind != KindProcess {
			mine = append(mine, l)
		}
	}
	recoverStale := "lazaret-cli recover --profile dev --workspace /home/u/src"
	cp := control.DomainPaths(runtime, clean)
	want := []Leftover{
		{Kind: KindStore, Status: Fail, Domain: stale.String(), Path: domainstore.Path(storage, stale), Command: recoverStale},
		{Kind: KindPublication, Status: Fail, Domain: stale.String(), Path: control.DomainPaths(runtime, stale).Identity, Command: recoverStale},
		{Kind: KindPublication, Status: Warn, Domain: clean.String(), Path: cp.Identity, Command: "rm -f -- " + shellQuote(cp.Identity)},
	}
	if len(mine) != len(want) {
		t.Fatalf("leftovers %+v, want %d", mine, len(want))
	}
	for i, w := range want {
		g := mine[i]
		g.Summary = ""
		if g != w {
			t.Errorf("leftover %d = %+v\nwant %+v", i, g, w)
		}
	}
	if !strings.Contains(mine[0].Summary, "Sandbox Intent") {
		t.Errorf("store leftover does not name the participant: %s", mine[0].Summary)
	}
}
