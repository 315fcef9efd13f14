// Package fsroot opens paths under the project's resolution rules: beneath
// a retained directory, inside an image root, or through no symbolic or
// magic link, with openat2(2) and O_CLOEXEC always.
//
// What belongs here: which RESOLVE_* flags a kind of open uses, so that a
// package says what it wants ("beneath this directory", "inside this
// root") and never builds an open_how itself.
//
// What does not: the system calls themselves and their EINTR and EAGAIN
// retries (package sys); identities (device, inode, mount ID) and the
// check of an opened descriptor against a recorded one (package hostid,
// kept out of this package so that the guest, which opens paths here,
// does not link the store's codec); and what a caller does when openat2
// is missing (ENOSYS before Linux 5.6, EPERM or ENOSYS under some seccomp
// filters): each caller decides whether that is fatal or falls back, and
// every error here keeps its errno reachable with errors.Is for that.
package fsroot
