package helpermain

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Runtime is a helper's Go runtime settings, chosen for its memory
// (docs/OPERATIONS.md, "Memory of a Domain's helpers"). A setting applies
// only when the environment does not set the variable the runtime reads
// for it, so that an operator can measure or run with another value. GOGC
// and GOMEMLIMIT are left to the runtime: a lower GOGC and a soft memory
// limit were measured and not adopted (the document says why).
type Runtime struct {
	// MaxProcs bounds GOMAXPROCS; 0 keeps the runtime's choice (the
	// number of CPUs). Each P costs an OS thread, a cache of partly used
	// spans and a garbage collection worker; a helper with no parallel
	// work needs one.
	MaxProcs int
}

// apply sets r where lookup (the environment) leaves the runtime's own
// variable unset.
func (r Runtime) apply(lookup func(string) (string, bool)) error {
	if r.MaxProcs < 0 {
		return fmt.Errorf("runtime settings: MaxProcs %d is negative", r.MaxProcs)
	}
	if _, set := lookup("GOMAXPROCS"); r.MaxProcs > 0 && !set && runtime.GOMAXPROCS(0) > r.MaxProcs {
		runtime.GOMAXPROCS(r.MaxProcs)
	}
	return nil
}

// Settle returns what a helper allocated and no longer uses to the
// operating system: one forced collection and a scavenge of every free
// page (debug.FreeOSMemory), in the background so that the caller's next
// step does not wait for it. A helper whose start leaves garbage behind
// calls it once its start is done and reported (the coordinator once the
// generation is ready, the sidecar once readiness is proven, the view
// daemon once the view is ready and again one idle second after each sweep
// of its nodes): its resident memory is then its steady state, where the
// runtime would keep the garbage until its next periodic collection (up to
// two minutes later for an idle helper) and return it only gradually. The
// anchor and the supervisor do not: their heaps stay under 1 MiB, and the
// collection's workers cost them more than it frees.
func Settle() { go debug.FreeOSMemory() }
