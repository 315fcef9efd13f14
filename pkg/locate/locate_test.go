package locate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeExe(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
}

func TestFindOrder(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "bin")
	libexec := filepath.Join(root, "usr", "libexec", "lazaret")
	over := filepath.Join(root, "override")

	cases := []struct {
		name     string
		files    []string
		override string
		want     string
		wantErr  bool
	}{
		{"beside the CLI wins", []string{filepath.Join(bin, "h"), filepath.Join(libexec, "h")}, "", filepath.Join(bin, "h"), false},
		{"libexec fallback", []string{filepath.Join(libexec, "h")}, "", filepath.Join(libexec, "h"), false},
		{"override only", []string{filepath.Join(over, "h"), filepath.Join(bin, "h")}, over, filepath.Join(over, "h"), false},
		{"override never falls back", []string{filepath.Join(bin, "h")}, over, "", true},
		{"missing", nil, "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(root)
			os.MkdirAll(bin, 0o755)
			for _, f := range tc.files {
				writeExe(t, f, 0o755)
			}
			f := &Finder{override: tc.override, selfDir: bin}
			got, err := f.Find("h")
			if tc.wantErr {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("Find error = %v, want ErrNotFound", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Find = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestFindRejects(t *testing.T) {
	dir := t.TempDir()
	writeExe(t, filepath.Join(dir, "noexec"), 0o644)
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	f := &Finder{selfDir: dir}
	for _, name := range []string{"noexec", "adir", "../x", ""} {
		if _, err := f.Find(name); err == nil {
			t.Errorf("Find(%q) succeeded", name)
		} else if name != "" && !strings.Contains(err.Error(), name) {
			t.Errorf("Find(%q) error %q does not name the helper", name, err)
		}
	}
}
