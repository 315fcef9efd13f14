package anchor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/pkg/image/idmap"
)

// The planner runs unprivileged: it only inspects and creates directories.
func TestPlan(t *testing.T) {
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := func(t *testing.T) Spec {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "lower"), 0o755); err != nil {
			t.Fatal(err)
		}
		return Spec{AnchorPath: exe, Lower: filepath.Join(root, "lower"), Upper: filepath.Join(root, "upper"),
			Work: filepath.Join(root, "work"), Merged: filepath.Join(root, "merged"), IDMap: idmap.Single(uid, gid)}
	}
	t.Run("creates state directories 0700", func(t *testing.T) {
		s := base(t)
		setup, method, err := s.plan(uid, gid)
		if err != nil {
			t.Fatal(err)
		}
		if method != MapDirect {
			t.Errorf("method %v", method)
		}
		for _, c := range []PathCheck{setup.Upper, setup.Work, setup.Merged} {
			st, err := os.Stat(c.Path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o700 {
				t.Errorf("%s mode %v, want 0700", c.Path, st.Mode().Perm())
			}
		}
		if setup.Lower.Inode == 0 || setup.Upper.Device != setup.Work.Device {
			t.Errorf("setup %+v", setup)
		}
		if err := setup.validate(); err != nil {
			t.Errorf("planned Setup breaks the wire rules: %v", err)
		}
	})
	tests := []struct {
		name string
		edit func(t *testing.T, s *Spec)
		has  string
	}{
		{"relative anchor", func(t *testing.T, s *Spec) { s.AnchorPath = "lazaret-anchor" }, "not absolute"},
		{"anchor not executable", func(t *testing.T, s *Spec) {
			p := filepath.Join(t.TempDir(), "a")
			os.WriteFile(p, nil, 0o644)
			s.AnchorPath = p
		}, "not an executable"},
		{"unclean path", func(t *testing.T, s *Spec) { s.Upper += "/" }, "clean form"},
		{"merged inside lower", func(t *testing.T, s *Spec) { s.Merged = s.Lower + "/m" }, "overlap"},
		{"same upper and work", func(t *testing.T, s *Spec) { s.Work = s.Upper }, "overlap"},
		{"map without root", func(t *testing.T, s *Spec) {
			s.IDMap = idmap.Map{UIDs: []idmap.Range{rg(1, uid, 1)}, GIDs: []idmap.Range{rg(0, gid, 1)}}
		}, "does not map container UID 0"},
		{"upper is a file", func(t *testing.T, s *Spec) { os.WriteFile(s.Upper, nil, 0o600) }, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base(t)
			tt.edit(t, &s)
			_, _, err := s.plan(uid, gid)
			if err == nil || !strings.Contains(err.Error(), tt.has) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.has)
			}
			if !errors.Is(err, ErrSpec) && !errors.Is(err, ErrIDMap) {
				t.Errorf("error %v is neither ErrSpec nor ErrIDMap", err)
			}
		})
	}
}
