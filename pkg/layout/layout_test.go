package layout

import (
	"slices"
	"testing"
)

func TestProductionContainsRequiredDestinations(t *testing.T) {
	l := Production()
	if !l.Valid() {
		t.Fatal("production layout is not valid")
	}
	for _, d := range []string{"/workspace", "/run/lazaret", "/proc", "/sys", "/dev", "/etc/resolv.conf", "/etc/hosts", "/etc/hostname", "/tmp"} {
		if !slices.Contains(l.Protected(), d) {
			t.Errorf("production layout lacks %q", d)
		}
	}
	if !slices.IsSorted(l.Protected()) {
		t.Errorf("Protected() is not sorted: %q", l.Protected())
	}
}

func TestProtectedReturnsCopy(t *testing.T) {
	l := Production()
	p := l.Protected()
	p[0] = "/changed"
	if l.Protected()[0] == "/changed" {
		t.Fatal("Protected() exposes internal storage")
	}
}

func TestZeroLayoutIsInvalid(t *testing.T) {
	var l SandboxLayoutV1
	if l.Valid() {
		t.Fatal("zero layout reports valid")
	}
	var nilLayout *SandboxLayoutV1
	if nilLayout.Valid() {
		t.Fatal("nil layout reports valid")
	}
	if _, ok := nilLayout.Conflicts("/workspace"); ok {
		t.Fatal("nil layout reports a conflict")
	}
}

func TestConflicts(t *testing.T) {
	l := Production()
	tests := []struct {
		path string
		dest string
		ok   bool
	}{
		{"/workspace", "/workspace", true},
		{"/workspace/x", "/workspace", true},
		{"/run", "/run/lazaret", true},
		{"/run/lazaret/mailbox", "/run/lazaret", true},
		{"/etc", "/etc/hostname", true},
		{"/dev/shm", "/dev", true},
		{"/tmp/cache", "/tmp", true},
		{"/workspaces", "", false},
		{"/home/agent", "", false},
		{"/etc/ssl", "", false},
		{"/run/other", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			dest, ok := l.Conflicts(tc.path)
			if ok != tc.ok || dest != tc.dest {
				t.Fatalf("Conflicts(%q) = %q, %v; want %q, %v", tc.path, dest, ok, tc.dest, tc.ok)
			}
		})
	}
}

func TestBuildRejects(t *testing.T) {
	tests := map[string][]string{
		"missing workspace": {"/proc"},
		"duplicate":         {"/workspace", "/proc", "/proc"},
		"root":              {"/workspace", "/"},
		"relative":          {"/workspace", "proc"},
		"trailing slash":    {"/workspace", "/proc/"},
		"dot dot":           {"/workspace", "/a/../b"},
		"empty component":   {"/workspace", "/a//b"},
	}
	for name, dests := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := build(dests); err == nil {
				t.Fatalf("build(%q) succeeded", dests)
			}
		})
	}
}

func TestIsSandboxPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/a": true, "/a/b": true, "/": false, "": false, "a": false, "/a/": false,
		"/a/./b": false, "/a/../b": false, "//a": false, "/a\x00": false,
	} {
		if got := IsSandboxPath(p); got != want {
			t.Errorf("IsSandboxPath(%q) = %v, want %v", p, got, want)
		}
	}
}
