package testproc

import (
	"os"
	"testing"
)

func TestParentOf(t *testing.T) {
	// Each stat line with the parent it names, or -1 where it names none.
	for stat, want := range map[string]int{
		"42 (sh) S 7 42 42 0": 7,
		"42 (a) b (c) R 9 42": 9,  // a command name with spaces and parentheses
		"42 sh S 7":           -1, // no command name in parentheses
		"42 (sh) S":           -1, // cut short before the parent
	} {
		got, ok := parentOf([]byte(stat))
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("parentOf(%q) = %d, want %d", stat, got, want)
		}
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
