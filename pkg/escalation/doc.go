// Package escalation is the Host Coordinator's engine for host escalation:
// it takes the records the guest leaves in the mailbox outbox, verifies
// them, and drives each request through the model's state machine
// (ReceiveEscalation, AutoApprove or QueuePrompt and BeginPrompt,
// DeveloperApprove or DeveloperDeny, StartHostExecution,
// CompleteHostExecution, TimeoutRequest, CancelRequest, FailHostExecution,
// DeliverResult), running approved commands on the host and streaming their
// output back as signed result chunks.
//
// What belongs here: record intake and verification order, the per-session
// request state, the pure approval planner (Decide, CommandRequiresShell),
// the scrubbed host environment, the executor (executable re-check, direct
// execution of the opened object, process-group kill), and result delivery
// with acknowledgment tracking. What does not: the terminal prompt itself
// (the coordinator implements Prompter and the CLI owns the terminal),
// session registration and the control socket, the audit log (fed through
// Config.Journal, which the engine tells where a record must be durable
// before it acts: Event.Durable), and the mailbox file protocol
// (pkg/mailbox).
//
// Files:
//   - plan.go: CommandRequiresShell and Decide, pure and table-tested.
//   - env.go: the scrubbed environment of host commands.
//   - engine.go: Engine, Config, record intake and session state.
//   - request.go: one request's lifecycle from verification to delivery.
//   - exec.go: executable re-check and host execution with streaming.
//   - lifetime.go: EndSession (a capability ends with its session) and
//     the errors of admission.
//   - errors.go: sentinel errors carried by discard reasons and events.
//
// Subpackage escalationtest builds protocol fixtures over a real mailbox
// and plays the guest's side, for tests here and in lazaret-guest.
package escalation
