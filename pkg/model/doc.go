// Package model is Lazaret's protocol model, tla/Lazaret.tla, transliterated
// into Go, with an explicit-state checker that explores the finite fixture
// of tla/Lazaret.cfg exhaustively and checks every invariant listed there.
//
// What belongs here: the model's values, state, initial state, actions,
// next-state relation and safety invariants, each written to read like
// the TLA+ it comes from; the breadth-first checker (Check); and the step
// function (Init, Successors, Model.Apply) that validates a recorded
// implementation trace against Next. What does not: the liveness
// properties under PROPERTIES in Lazaret.cfg (SessionEventuallyResolves,
// RequestEventuallyResolves, PromptEventuallyRestoresTerminal,
// EmptyDomainEventuallyStops, FailedDomainEventuallyRecovers) and the weak
// fairness of Spec, which only TLC checks; trace recording, which belongs
// to the components that emit the events; and any parser of TLA+ or of
// TLC configurations.
//
// # From TLA+ to Go
//
// Constants. The finite sets Domains, Sessions, Requests and Commands
// become the Go types Domain, Session, Request and Command, whose
// constants are the fixture's model values (D1; S1, S2; R1, R2, R3;
// ExactCmd, PromptCmd, ShellCmd, EditedCmd) followed by the sentinels
// NoSession, NoRequest and NoCommand. Their sizes are the constants
// NumDomains, NumSessions, NumRequests and NumCommands. Every other
// constant is a field of Fixture, indexed like the function it is;
// CfgFixture holds the *Fixture operators Lazaret.cfg binds, and
// Fixture.Validate checks the ASSUME clause.
//
// Values. Each set of strings the spec names (DomainPhases, SessionPhases,
// RequestPhases, ...) becomes a uint8 enumeration whose String method
// returns the TLA+ string; ApprovalSources mixes the model value
// NoApproval with the strings "AutoRule" and "Developer", which the
// ApprovalSource type keeps apart only in printing. A function over
// Domains, Sessions or Requests is a Go array indexed by the element; a
// set of elements is a bit set (DomainSet, SessionSet, RequestSet). Bit
// sets and arrays are canonical, so Go equality of State is TLA+ equality
// of states, and State is itself a valid map key. For the visited set,
// Key packs a State into 78 bits.
//
// State. State has one field per variable, in the order of VARIABLES; Var
// names the variables for diagnostics, and Changed reports which differ
// between two states. Init is the single initial state of Init.
//
// Actions. Every action of Next is a method of Model of the form
//
//	func (m *Model) StartSandbox(st State, d Domain) (State, bool)
//
// named as in the spec and taking its parameters in the same order. The
// body follows the definition conjunct by conjunct, with the conjunct
// quoted in a comment: first the guards, each returning false when it
// fails; then next := st, which is the UNCHANGED of every variable, and one
// assignment per primed conjunct, reading only st, as TLA+ reads only
// unprimed variables. EXCEPT becomes an assignment to one element; a
// function constructor [x \in S |-> e] becomes a loop assigning every
// element; IF/THEN/ELSE inside EXCEPT assigns in the THEN case and leaves
// the element (@) otherwise. The actions live in three files that follow
// the three parts of the spec:
//
//   - actions_lifecycle.go, Domain and Session lifecycle (lines 323-679):
//     StartNewDomain, StartReadySession, WaitForDomain,
//     RestartWaitingDomain, MountStateAnchor, CreateTrustAnchor,
//     StartSidecar, StartRuntimeSupervisor, ArmRuntimeCausalEdge,
//     StartSandbox, PublishDomain, AdvanceWaitingSession,
//     RejectConfigurationMismatch, RegisterSession, DisconnectSession,
//     BeginTeardown, StopSandbox, StopSidecar, UnmountStateAnchor,
//     FinishTeardown.
//   - actions_escalation.go, host escalation (lines 681-892):
//     ReceiveEscalation, AutoApprove, QueuePrompt, BeginPrompt,
//     DeveloperApprove, DeveloperDeny, StartHostExecution,
//     CompleteHostExecution, TimeoutRequest, CancelRequest,
//     FailHostExecution, DeliverResult.
//   - actions_failure.go, failure and recovery (lines 894-1204):
//     FailDomain, HardLoseHostCoordinator, HardLoseRuntimeSupervisor,
//     HardLoseAttachedRunsc, StopHostCoordinatorProcess,
//     ResumeHostCoordinatorProcess, StopRuntimeSupervisorProcess,
//     ResumeRuntimeSupervisorProcess, StopAttachedRunscProcess,
//     ResumeAttachedRunscProcess, BeginRecovery, RecoverSandbox,
//     RecoverSidecar, RecoverStateAnchor, FinishRecovery.
//
// The operators they use (Dom, ReqSession, RuntimeGenerationAbsent,
// RuntimeIdentityTupleReady, Interested, ...) are in operators.go under
// their TLA+ names; ConsumeRuntimeFault, which both guards and assigns, is
// consumeRuntimeFault and is called where the conjunct stands.
//
// Next. next.go lists the actions in the order of Next (lines 1261-1273)
// and expands each \E over the fixture's sets, DeveloperApprove's cmd
// included, into action instances. Successors returns the enabled
// instances of a state as Steps (action name, arguments by name and by
// value, successor); Model.Apply takes one step by name.
//
// Invariants. invariants.go has one method per invariant, named as in the
// spec; Invariants lists them in the order of INVARIANTS in Lazaret.cfg,
// which is TypeOK followed by the conjuncts of Safety.
//
// # The checker
//
// Check runs a breadth-first search from Init with a visited set of Keys.
// Every state is checked against every invariant when it is first found,
// so the first violation found is at the least depth any violation
// occurs, and the parent links give a shortest trace, which the returned
// *Violation carries and Violation.Format prints as TLC does. TypeOK is
// checked on every successor before it is encoded, because the 78-bit
// encoding is exact only for well-typed states. Config.MaxDepth bounds
// the search; Config.Overrides replaces actions by name, which the
// mutation tests use to prove that broken actions are caught.
//
// # Choices where the spec leaves room
//
//   - Next names the three Resume*Process actions twice (in DomainProgress
//     and in RuntimePhysicalInterleaving). The disjuncts are identical, so
//     each is one action here.
//   - DeliveredResultPhase is a CASE without OTHER; DeliveredResultPhase
//     also reports whether its argument was in PendingResultPhases, and
//     DeliverResult only applies it under that guard.
//   - StartHostExecution applies CommandContentSafe to approvedCommand[r].
//     Where that is NoCommand TLC would stop with an error; the Go treats
//     it as a failing guard. It cannot happen in the model: an Approved
//     request always carries a command.
//   - PhysicalProcessStates' "Starting" and ResourceStates' "Failed" are
//     never assigned by any action; they exist for TypeOK only.
//
// # Keeping the Go and the spec in step
//
// The tests read tla/Lazaret.tla and tla/Lazaret.cfg and fail when they
// drift from this package: the actions of Next and their parameters
// (TestSpecActionsMatchNext), the VARIABLES (TestSpecVariablesMatchState),
// the INVARIANTS and the conjuncts of Safety
// (TestSpecInvariantsMatchConfig), every non-UNCHANGED conjunct of every
// action quoted in the comments of its Go method (TestActionsQuoteSpec),
// and, over the whole reachable state space, that no Go action changes a
// variable its TLA+ action leaves UNCHANGED (TestFramesRespected).
// TestCheckFixture pins the number of distinct states and the depth. When
// the spec changes: edit the action's Go method conjunct by conjunct,
// quoting the new text; update the line references; run the tests; if the
// state count changes, confirm the new count with TLC (tla/CHECKER.md)
// and update the constants in check_test.go and the Example.
package model
