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
// A generation (generation.go) is its scope (scope.go: identities,
// configuration, directory, records) and its participants in the model's
// start order, driven by one loop each way: start, and release in the
// reverse order. Each participant owns its state and has its start, its
// release and the release of its records after a crash in one file:
//   - prepare.go: PreparedLower (the image prepared, the catalog lease).
//   - anchor.go: StateAnchor (user and mount namespaces, overlay root).
//   - trust.go, escalation.go: the trust anchor and the escalation engine.
//   - view.go, gitroute.go, sticky.go: the /workspace view (GitRouting).
//   - netview.go: the network sidecar and its helper (Network, Helper).
//   - sandbox.go, runsc.go: the Runtime Supervisor and runsc (Sandbox).
//   - publish.go: the control socket and identity file (Publication).
//
// Around them: plan.go (the pure start, release and recovery orders),
// serve.go (Serve: the lock hand-over, recovery, the generation's life),
// recover.go (recovery from the records alone), teardown.go (linger,
// teardown, failure), sessions.go and launch.go (control.Sessions: each
// command a gated `runsc exec` client), report.go (the start report).
//
// What does not belong here: the wire formats (pkg/control, pkg/protocol),
// the store rules (pkg/domainstore), the anchor and supervisor processes
// (their own modules), and the OCI plan (pkg/bundle).
package coordinator
