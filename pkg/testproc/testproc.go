// Package testproc lists the host's processes for tests that look for what
// a run started or left behind: each process's PID, parent and argv, read
// from /proc.
package testproc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is one process seen in /proc.
type Process struct {
	PID, PPID int
	Argv      []string
}

func (p Process) String() string { return fmt.Sprintf("%d (parent %d) %q", p.PID, p.PPID, p.Argv) }

// List returns the processes whose command line and stat can be read;
// kernel threads (an empty command line) and processes that exit while
// they are read are left out.
func List() []Process {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []Process
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		ppid, ok := parentOf(stat)
		if !ok {
			continue
		}
		out = append(out, Process{PID: pid, PPID: ppid, Argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")})
	}
	return out
}

// parentOf reads the parent PID (field 4) of a /proc/<pid>/stat line. The
// command name before it is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parentOf(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid, true
}
