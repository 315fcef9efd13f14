// Package sys holds thin wrappers over the Linux system calls the project
// makes: each retries EINTR and returns an error that names the operation,
// an *os.PathError (or *os.LinkError for two paths) when a path is involved
// and an *os.SyscallError when only a descriptor is. The errno stays
// reachable with errors.Is.
//
// What belongs here: one function per system call, with the arguments of
// golang.org/x/sys/unix and no policy beyond the retry. openat2 also retries
// EAGAIN a bounded number of times, because the kernel returns it when a
// concurrent rename or mount races a RESOLVE_* walk and asks the caller to
// try again.
//
// What does not: deciding what an errno means (ENOENT as "absent", ESRCH as
// "already exited"), resolving paths inside a root (package fsroot), or
// message framing on sockets (package seqpacket). Those live one layer up
// and call these wrappers.
package sys
