package config

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

func TestSummarize(t *testing.T) {
	f := newFixture(t)
	opts := f.options("")
	second := "\n[profiles.claude]\nimage = \"docker.io/library/debian:bookworm\"\n"
	tests := []struct {
		name     string
		doc      string
		profiles []string
		storage  string
		field    string // of the first problem; "" when valid
	}{
		{"default roots", testDoc("", ""), []string{"dev"}, filepath.Join(f.data, "lazaret"), ""},
		{"two profiles", testDoc("", second), []string{"claude", "dev"}, filepath.Join(f.data, "lazaret"), ""},
		{"bad data_root", testDoc("", "\n[storage]\ndata_root = \"relative\"\n"), nil, "", "storage.data_root"},
		{"bad profile field", testDoc(`isolate_gitignored = "yes"`, ""), nil, "", "profiles.dev.isolate_gitignored"},
		{"unknown field", testDoc("colour = 1", ""), nil, "", "profiles.dev.colour"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Summarize([]byte(f.expand(tc.doc)), "config.toml", opts.Environment)
			if tc.field != "" {
				ps := problemsOf(t, err)
				if len(ps) == 0 || ps[0].Field != tc.field || ps[0].File != "config.toml" {
					t.Fatalf("problems %s, want one at %s", dumpProblems(ps), tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("summarize: %v%s", err, dumpProblems(problemsOf(t, err)))
			}
			if !slices.Equal(s.Profiles, tc.profiles) || s.StorageRoot != tc.storage || s.RuntimeRoot != filepath.Join(f.run, "lazaret") || s.SchemaVersion != 1 {
				t.Fatalf("summary %+v, want profiles %v storage %s", s, tc.profiles, tc.storage)
			}
		})
	}
}

func TestSummarizeDataRoot(t *testing.T) {
	f := newFixture(t)
	doc := "schema = \"lazaret-trusted-host-config-v1\"\n[storage]\ndata_root = \"~/store\"\n" + testDoc("", "")[len("schema = \"lazaret-trusted-host-config-v1\"\n"):]
	s, err := Summarize([]byte(doc), "config.toml", f.options("").Environment)
	if err != nil {
		t.Fatalf("summarize: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	if want := filepath.Join(f.home, "store"); s.StorageRoot != want {
		t.Fatalf("storage root %q, want %q", s.StorageRoot, want)
	}
	cfg, err := Resolve([]byte(doc), f.options("dev"))
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	defer cfg.Close()
	if cfg.StorageRoot() != s.StorageRoot || cfg.RuntimeRoot() != s.RuntimeRoot {
		t.Fatalf("resolve roots %q %q, summary %q %q", cfg.StorageRoot(), cfg.RuntimeRoot(), s.StorageRoot, s.RuntimeRoot)
	}
}

// FuzzSummarize: Summarize fails only with problems, and accepts every
// document Resolve accepts, with the same roots and the resolved profile
// among its names.
func FuzzSummarize(f *testing.F) {
	fx := newFixture(f)
	for _, s := range []string{testDoc("", ""), testDoc("", "\n[profiles.b]\nimage = \"x\"\n"), "schema = 1", "[storage]\ndata_root = \"~/s\"\n", v2Base} {
		f.Add([]byte(fx.expand(s)))
	}
	opts := fx.options("dev")
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Summarize(data, "config.toml", opts.Environment)
		if err != nil {
			var ie *InvalidError
			if s != nil || !errors.As(err, &ie) || len(ie.Problems) == 0 {
				t.Fatalf("error is not a nonempty *InvalidError alone: %v", err)
			}
		}
		cfg, rerr := Resolve(data, opts)
		if rerr != nil {
			return
		}
		defer cfg.Close()
		if err != nil {
			t.Fatalf("Resolve accepts what Summarize refuses: %v", err)
		}
		if s.StorageRoot != cfg.StorageRoot() || s.RuntimeRoot != cfg.RuntimeRoot() || !slices.Contains(s.Profiles, "dev") || s.SchemaVersion != cfg.SchemaVersion() {
			t.Fatalf("summary %+v disagrees with the resolved configuration", s)
		}
	})
}
