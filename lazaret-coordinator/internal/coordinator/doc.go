// Package coordinator is the Host Coordinator (HC) of one Lazaret generation:
// it takes over the Domain lock from lazaret-cli, runs the model's start
// order (PreparedLower lease, State Anchor, trust anchor, workspace view,
// network, Sandbox, Publication), serves the control channel, runs sessions
// through `runsc exec`, and tears the generation down in the model's order
// when no session is interested.
//
// Every participant is recorded in the Domain Store before it is acquired
// and committed after, with the exact identities the schema asks for
// (pidfs process identities, namespace and mount identities). Teardown and
// failure release only what was recorded, in the reverse of the start
// order, and prove absence before a record becomes Clean.
//
// Files:
//   - plan.go: the pure start-order and release planner (table-tested).
//   - runsc.go: the runsc command lines (pure) and the runsc locator.
//   - serve.go: Serve, the lock hand-over and the start report.
//   - generation.go: the generation's records and its Domain Store writes.
//   - prepare.go, anchor.go, trust.go, view.go, sandbox.go, publish.go:
//     one start step each, with its release.
//   - gitroute.go: the workspace view participant (lazaret-gitroute run in
//     the State Anchor's namespaces) and its client.
//   - sessions.go, launch.go: the control.Sessions implementation and the
//     gated start of each `runsc exec` client.
//   - teardown.go: linger, teardown and failure.
//
// What does not belong here: the wire formats (pkg/control, pkg/protocol),
// the store rules (pkg/domainstore), the anchor and supervisor processes
// (their own modules), and the OCI plan (pkg/bundle).
package coordinator
