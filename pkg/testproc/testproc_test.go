package testproc

import (
	"os"
	"testing"
)

func TestParentOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		stat string
		want int
		ok   bool
	}{
		{"plain", "42 (sh) S 7 42 42 0", 7, true},
		{"name with spaces and parentheses", "42 (a) b (c) R 9 42", 9, true},
		{"no name", "42 sh S 7", 0, false},
		{"cut short", "42 (sh) S", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parentOf([]byte(tc.stat))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("parentOf(%q) = %d, %v; want %d, %v", tc.stat, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestListHasThisProcess(t *testing.T) {
	for _, p := range List() {
		if p.PID == os.Getpid() {
			if p.PPID != os.Getppid() || len(p.Argv) == 0 || p.Argv[0] != os.Args[0] {
				t.Fatalf("this process is listed as %v, want parent %d and argv %q", p, os.Getppid(), os.Args)
			}
			return
		}
	}
	t.Fatalf("pid %d is not listed", os.Getpid())
}
