package coordinator

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"lazaret.dev/pkg/control"
)

// workspaceView provides the sandbox's /workspace: the plain bind when
// the profile's isolate_gitignored is false, else the lazaret-gitroute
// view (routeView, gitroute.go), a GitRouting participant of its own
// (recorded before it starts), which the bind is not.
type workspaceView interface {
	// The view is the GitRouting step: Start prepares it, Release
	// undoes it after the sandbox has stopped.
	participant
	// Source is the host directory the sandbox binds at /workspace.
	Source() string
	// Participant reports whether the view is a GitRouting participant.
	Participant() bool
}

// bindView binds the canonical workspace itself. Nothing outside the
// sandbox is acquired: the bind is one of the container's own mounts,
// made by runsc inside the sandbox and covered by the Sandbox
// participant's bundle digest, and it ends with the sandbox. So no
// GitRouting participant is recorded: its ownership record requires a
// daemon identity and a mount on the host, and the bind has neither.
type bindView struct{ dir string }

func (v *bindView) Start(context.Context) error {
	st, err := os.Stat(v.dir)
	if err != nil {
		return fmt.Errorf("workspace %q: %w", v.dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("workspace %q is not a directory", v.dir)
	}
	return nil
}
func (v *bindView) Step() Step                    { return StepGitRouting }
func (v *bindView) Source() string                { return v.dir }
func (v *bindView) Participant() bool             { return false }
func (v *bindView) Lost() <-chan struct{}         { return nil }
func (v *bindView) Release(context.Context) error { return nil }

// networkView provides the sandbox's network: the enforced network of
// the network sidecar (sidecarNetwork, netview.go), whose Network and Helper
// participants are recorded before anything of them starts.
type networkView interface {
	// The network is the network step: Start prepares it and proves its
	// readiness, Release undoes it after the sandbox has stopped.
	participant
	// NamespacePath is the network namespace runsc joins.
	NamespacePath() string
	// Resolvers are the DNS servers the sandbox may use.
	Resolvers() []netip.Addr
	Participant() bool
	// Publish publishes ports of the sandbox on the host.
	control.Ports
}
