package spawn

import (
	_ "unsafe" // for go:linkname
)

// The runtime's fork hooks, as package syscall uses them around its own
// fork: BeforeFork blocks signals on this thread and makes any stack
// growth fail loudly until AfterFork (parent) or for good (child);
// AfterForkInChild resets the handled signals to their defaults and
// restores the signal mask in the child. The runtime keeps these three
// reachable by go:linkname for code outside package syscall that forks
// (go.dev/issue/67401).

//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

//go:linkname runtimeAfterForkInChild syscall.runtime_AfterForkInChild
func runtimeAfterForkInChild()
