package coordinator

import (
	"fmt"
	"slices"

	"lazaret.dev/pkg/domainstore"
)

// Step is one step of a generation's start order. Steps are the model's
// actions (tla/Lazaret.tla) that acquire something.
type Step int

// The steps in the model's start order.
const (
	StepPrepare    Step = iota + 1 // PreparedLower lease
	StepAnchor                     // MountStateAnchor
	StepTrust                      // CreateTrustAnchor
	StepGitRouting                 // the /workspace view
	StepNetwork                    // StartSidecar
	StepSandbox                    // StartRuntimeSupervisor, ArmRuntimeCausalEdge, StartSandbox
	StepPublish                    // PublishDomain
)

var stepNames = map[Step]string{
	StepPrepare:    "prepare",
	StepAnchor:     "anchor",
	StepTrust:      "trust",
	StepGitRouting: "workspace",
	StepNetwork:    "network",
	StepSandbox:    "sandbox",
	StepPublish:    "publish",
}

// String is the step's name in the start report ("step prepare").
func (s Step) String() string {
	if n, ok := stepNames[s]; ok {
		return n
	}
	return fmt.Sprintf("step(%d)", int(s))
}

// stepRoles are the participant records each step writes, in release
// order; the trust anchor writes none.
var stepRoles = map[Step][]domainstore.Role{
	StepPrepare:    {domainstore.RolePreparedLower},
	StepAnchor:     {domainstore.RoleStateAnchor},
	StepGitRouting: {domainstore.RoleGitRouting},
	StepNetwork:    {domainstore.RoleHelper, domainstore.RoleNetwork},
	StepSandbox:    {domainstore.RoleSandbox},
	StepPublish:    {domainstore.RolePublication},
}

// stepNeeds are the steps each step waits for. They are the model's
// enabling conditions (tla/Lazaret.tla: StartSidecar needs the State
// Anchor mounted and the trust anchor created, StartRuntimeSupervisor the
// sidecar Ready, PublishDomain everything) and the physical design's:
// the State Anchor mounts the prepared lower, the view's daemon runs in
// the anchor's namespaces, and the sandbox mounts the lower, the view and
// the credential bundle. Steps that need nothing of each other run at the
// same time: the lease with the trust anchor, and the view with the
// network. The model orders the sandbox after the network's readiness, so
// the sandbox's boot does not overlap the readiness proof.
var stepNeeds = map[Step][]Step{
	StepPrepare:    nil,
	StepAnchor:     {StepPrepare},
	StepTrust:      nil,
	StepGitRouting: {StepAnchor},
	StepNetwork:    {StepAnchor, StepTrust},
	StepSandbox:    {StepPrepare, StepAnchor, StepTrust, StepGitRouting, StepNetwork},
	StepPublish:    {StepSandbox, StepTrust},
}

// Needs returns the steps of order that step waits for.
func Needs(step Step, order []Step) []Step {
	var out []Step
	for _, n := range stepNeeds[step] {
		if slices.Contains(order, n) {
			out = append(out, n)
		}
	}
	return out
}

// RecoveryOrder is the order in which a recovering coordinator releases
// an earlier generation's participants from their records: the reverse of
// the start order, so the model's RecoverSandbox, then the network
// (RecoverSidecar), then RecoverStateAnchor, with the participants the
// model does not name where the teardown releases them.
func RecoveryOrder() []domainstore.Role {
	var out []domainstore.Role
	for s := StepPublish; s >= StepPrepare; s-- {
		out = append(out, stepRoles[s]...)
	}
	return out
}

// PlanInput says which optional participants a generation has.
type PlanInput struct {
	// GitRoutingDaemon: the workspace view is a lazaret-gitroute daemon
	// (a GitRouting participant); false for the plain bind, which is part
	// of the sandbox's own mounts.
	GitRoutingDaemon bool
	// NetworkSidecar: the network is a sidecar in an enforcement namespace
	// (Network and Helper participants); false for --network=none.
	NetworkSidecar bool
}

// StartOrder returns the steps of a generation in the model's order,
// leaving out the participants the input does not have. The trust anchor
// and the workspace view are always steps: the view exists either as a
// daemon or as a bind the sandbox step mounts, but it is prepared here.
func StartOrder(in PlanInput) []Step {
	order := []Step{StepPrepare, StepAnchor, StepTrust, StepGitRouting}
	if in.NetworkSidecar {
		order = append(order, StepNetwork)
	}
	return append(order, StepSandbox, StepPublish)
}

// ReleaseOrder returns what to release, in order, when the steps in done
// were completed (or begun: a step that failed half way is released too):
// the reverse of the start order, as the model's teardown and recovery
// release (BeginTeardown withdraws the publication first, then
// StopSandbox, StopSidecar, UnmountStateAnchor, and the lease last). The
// trust anchor holds no runtime resource outside the generation's
// directory and is released with it.
func ReleaseOrder(done []Step) ([]Step, error) {
	seen := map[Step]bool{}
	for _, s := range done {
		if _, ok := stepNames[s]; !ok {
			return nil, fmt.Errorf("release plan: unknown %v", s)
		}
		if seen[s] {
			return nil, fmt.Errorf("release plan: %v listed twice", s)
		}
		seen[s] = true
	}
	out := slices.Clone(done)
	slices.SortFunc(out, func(a, b Step) int { return int(b) - int(a) })
	return out, nil
}

// CheckOrder verifies that steps follow the model's start order: each step
// after every step it depends on, and nothing repeated.
func CheckOrder(steps []Step) error {
	last := Step(0)
	for i, s := range steps {
		if _, ok := stepNames[s]; !ok {
			return fmt.Errorf("start order: unknown %v at %d", s, i)
		}
		if s <= last {
			return fmt.Errorf("start order: %v at %d comes after %v", s, i, last)
		}
		last = s
	}
	if len(steps) == 0 || steps[len(steps)-1] != StepPublish {
		return fmt.Errorf("start order: publication must be the last step")
	}
	if !slices.Contains(steps, StepAnchor) || !slices.Contains(steps, StepSandbox) || !slices.Contains(steps, StepTrust) {
		return fmt.Errorf("start order: the State Anchor, trust anchor and Sandbox steps are required")
	}
	return nil
}
