package anchor

import (
	"errors"
	"slices"
	"testing"

	"lazaret.dev/pkg/image/idmap"
)

func TestChooseIDMap(t *testing.T) {
	sub := []byte("# comment\nother:200000:65536\nalice:100000:65536\n")
	tests := []struct {
		name string
		host IDMapHost
		want string
	}{
		{"root", IDMapHost{UID: 0, GID: 0, SubUID: sub, SubGID: sub, Helpers: true}, "uid 0:0:65536 gid 0:0:65536"},
		{"subordinate by name", IDMapHost{UID: 1000, GID: 1000, UserName: "alice", SubUID: sub, SubGID: sub, Helpers: true},
			"uid 0:1000:1,1:100000:65536 gid 0:1000:1,1:100000:65536"},
		{"subordinate by uid", IDMapHost{UID: 1000, GID: 1000, SubUID: []byte("1000:300000:1000\n"), SubGID: []byte("1000:400000:2000\n"), Helpers: true},
			"uid 0:1000:1,1:300000:1000 gid 0:1000:1,1:400000:2000"},
		{"no helpers", IDMapHost{UID: 1000, GID: 1000, UserName: "alice", SubUID: sub, SubGID: sub}, "uid 0:1000:1 gid 0:1000:1"},
		{"no subgid entry", IDMapHost{UID: 1000, GID: 1000, UserName: "alice", SubUID: sub, SubGID: []byte("bob:1:2\n"), Helpers: true}, "uid 0:1000:1 gid 0:1000:1"},
		{"no files", IDMapHost{UID: 1000, GID: 1001, Helpers: true}, "uid 0:1000:1 gid 0:1001:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ChooseIDMap(tt.host)
			if err != nil {
				t.Fatal(err)
			}
			if m.String() != tt.want {
				t.Errorf("map %s, want %s", m, tt.want)
			}
			if _, err := MethodFor(m, tt.host.UID, tt.host.GID); err != nil {
				t.Errorf("MethodFor: %v", err)
			}
		})
	}
}

func TestChooseIDMapRejectsBrokenEntries(t *testing.T) {
	for _, line := range []string{"alice:100000\n", "alice:x:10\n", "alice:1:0\n", "alice:4294967295:2\n", "alice:1000:5\n"} {
		t.Run(line, func(t *testing.T) {
			h := IDMapHost{UID: 1000, GID: 1000, UserName: "alice", SubUID: []byte(line), SubGID: []byte("alice:100000:10\n"), Helpers: true}
			if m, err := ChooseIDMap(h); err == nil {
				t.Errorf("accepted %q as %s", line, m)
			}
		})
	}
}

func TestMethodFor(t *testing.T) {
	tests := []struct {
		name     string
		m        idmap.Map
		uid, gid uint32
		want     MapMethod
		err      bool
	}{
		{"single", idmap.Single(1000, 1000), 1000, 1000, MapDirect, false},
		{"single of another user", idmap.Single(1001, 1000), 1000, 1000, MapHelper, false},
		{"subordinate", idmap.Map{UIDs: []idmap.Range{rg(0, 1000, 1), rg(1, 100000, 10)}, GIDs: []idmap.Range{rg(0, 1000, 1)}}, 1000, 1000, MapHelper, false},
		{"root writes anything", idmap.Map{UIDs: []idmap.Range{rg(0, 0, 65536)}, GIDs: []idmap.Range{rg(0, 0, 65536)}}, 0, 0, MapDirect, false},
		{"no container root", idmap.Map{UIDs: []idmap.Range{rg(1, 1000, 1)}, GIDs: []idmap.Range{rg(0, 1000, 1)}}, 1000, 1000, 0, true},
		{"empty", idmap.Map{}, 1000, 1000, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MethodFor(tt.m, tt.uid, tt.gid)
			if tt.err {
				if !errors.Is(err, ErrIDMap) {
					t.Errorf("error %v, want ErrIDMap", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("MethodFor = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestHelperArgs(t *testing.T) {
	got := helperArgs(77, []idmap.Range{rg(0, 1000, 1), rg(1, 100000, 65536)})
	want := []string{"77", "0", "1000", "1", "1", "100000", "65536"}
	if !slices.Equal(got, want) {
		t.Errorf("helperArgs = %q, want %q", got, want)
	}
}

func rg(c, h, n uint32) idmap.Range { return idmap.Range{Container: c, Host: h, Size: n} }
