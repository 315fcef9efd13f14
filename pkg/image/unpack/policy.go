package unpack

import (
	"errors"
	"fmt"
)

// PolicyID names the unpack policy implemented by Apply. It is the
// policy_id of every PreparedArtifact that Apply produced.
const PolicyID = "lazaret-unpack-v1"

// Errors for refused entries, wrapped in an *EntryError that names the layer
// and the entry. Test them with errors.Is.
var (
	// ErrAbsolutePath means an entry name starts with "/".
	ErrAbsolutePath = errors.New("absolute path in layer")
	// ErrParentComponent means an entry name contains a ".." component.
	ErrParentComponent = errors.New(`path has a ".." component`)
	// ErrLinkOutside means a hard link's target is absolute, contains "..",
	// or does not exist inside the root.
	ErrLinkOutside = errors.New("hard link target is not inside the root")
	// ErrDeviceNode means a character or block device entry; the policy
	// refuses device nodes for every caller, privileged or not.
	ErrDeviceNode = errors.New("device node refused by the unpack policy")
	// ErrUnsupportedType means a tar entry type the policy does not know.
	ErrUnsupportedType = errors.New("unsupported tar entry type")
	// ErrBadName means an entry or link name that cannot name a file: empty,
	// containing a NUL byte, or a whiteout of nothing.
	ErrBadName = errors.New("invalid entry name")
	// ErrOwnership means the mapped owner could not be set; as an
	// unprivileged user only IDs the user owns can be assigned.
	ErrOwnership = errors.New("mapped owner cannot be assigned")
	// ErrCorrupt means the layer is not a readable tar stream.
	ErrCorrupt = errors.New("corrupt layer tar stream")
	// ErrKernel means the kernel lacks openat2 (Linux 5.6 or newer is
	// required).
	ErrKernel = errors.New("kernel lacks openat2; Linux 5.6 or newer is required")
)

// EntryError reports a refused or failed entry: the layer digest, the entry
// name as written in the tar, and the cause.
type EntryError struct {
	Layer string
	Entry string
	Err   error
}

func (e *EntryError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("layer %s: %v", e.Layer, e.Err)
	}
	return fmt.Sprintf("layer %s: entry %q: %v", e.Layer, e.Entry, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }
