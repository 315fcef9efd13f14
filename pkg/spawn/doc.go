// Package spawn starts a child process that is named by a pidfd from the
// moment it exists, and gives the one place where that child is
// identified, signalled and reaped.
//
// What belongs here: starting an *exec.Cmd with CLONE_PIDFD (Start), or
// a GatedCmd held at a gate (Thread.StartGated), so
// no PID can be reused between the fork and the first use of the handle;
// reading the child's pidfs identity right after the fork, while it cannot
// yet have been reaped; signalling it only through the pidfd; reaping it
// exactly once; and Thread, which forks from one goroutine locked to an OS
// thread that never exits, because the kernel delivers a child's
// parent-death signal when the forking thread ends, not the process
// (golang/go#27505). What does not: what the child is and what it is
// told (argv, environment, the protocol on its inherited descriptors),
// which stays with each caller, and watching processes this process did
// not start (lazaret.dev/pkg/hostid).
//
// Gated children. StartGated forks a GatedCmd itself, with clone3
// (CLONE_PIDFD, no CLONE_VM), through the runtime's fork hooks that
// package syscall uses. Between the fork and execve the child runs only
// raw system calls: it sets its parent-death signal, moves its
// descriptors into place and closes every other one, then waits for one
// byte on its gate pipe; the gate opened, it enters the GatedCmd's
// namespaces with setns(2) and executes the program. A Go process cannot
// enter a user namespace itself (it is multithreaded), so this replaces a
// gate program plus nsenter: one fork and one execve, and the identity
// read after the fork is the program's. Its exec-status pipe reports a
// failed step and errno; exit codes ExitGateClosed and ExitExecFailed
// mean the program never ran.
//
// Descriptors. The pidfd is created by the kernel in clone(2) with
// O_CLOEXEC and belongs to the Process: Fd lends it, valid until Close.
// Close is the only place it is closed; a caller closes a Process once it
// no longer signals or polls it, normally after Done. A failed Start
// leaves nothing open: the pidfd is closed and a child that was forked is
// killed through it and reaped. The descriptors in cmd (ExtraFiles, stdio)
// stay the caller's, as with exec.Cmd.Start.
//
// Reaping. The child is reaped only when the caller asks: the first call
// of Wait or Done starts the single waiter, and every later call sees its
// result. Until then the child stays unreaped (at worst a zombie), so its
// PID and the pidfd keep naming it. A process with its own reaper (a child
// subreaper that collects every descendant with wait4) never calls Wait or
// Done and signals the child through Signal.
package spawn
