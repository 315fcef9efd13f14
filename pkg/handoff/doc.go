// Package handoff describes what a parent process hands a child it
// starts: the child's command line and the descriptors it inherits.
//
// A Layout is that contract for one kind of child (`lazaret-coordinator
// serve`, `lazaret-supervisor gate`, the gitroute daemon, ...). The parent
// renders the command line with Argv and the exec.Cmd.ExtraFiles with
// ExtraFiles (both at once from the typed form with Render); the child
// parses the command line with Parse and takes its descriptors with
// Inherit. Descriptor numbers are never written at a call
// site: the i-th name of Layout.Files is descriptor FirstFD+i, on both
// sides, because both use the same Layout.
//
// The typed form of each hand-off (its flag values as Go fields, its
// files as *os.File) lives beside the code that owns that child, and
// converts to and from this package's untyped values. This package knows
// nothing of any particular child.
//
// What does not belong here: starting, waiting for or reaping processes,
// and the protocols spoken over the inherited descriptors.
package handoff
