// Package domainstore is the Domain Store: the durable record of one
// Domain, its generations and everything each generation acquired, kept so
// that a Host Coordinator (or a later bootstrap recovery) can release
// exactly what was acquired, from recorded evidence alone.
//
// It holds the records of the schema's Domain Store, Participant
// ownership and Session terminal ownership sections (Domain, Generation,
// Participant with its seven ownership variants, StateAnchorReleaseEvidence,
// Session, SessionTerminal, PtyIdentity, GuestProcessIdentity, Mailbox),
// one guarded transition function per record kind (CheckDomain,
// CheckGeneration, CheckParticipant, CheckSession, CheckSessionTerminal,
// CheckMailbox), and the bbolt-backed Store whose Put methods apply them.
// Process identities and the ownership union come from package hostid;
// file mechanics and error classes from package store.
//
// Choices where the schema leaves room, and why:
//
//   - durable_decision holds the model's Domain phases (DomainPhases of
//     Lazaret.tla) and session_phase its SessionPhases. The store does not
//     redefine either machine: a write may set any value the model can
//     reach from the recorded one (the transitive closure of the model's
//     steps), so a writer need not persist every intermediate phase, but a
//     regression (Ready back to Starting, anything out of Closed) is
//     refused. A generation is created in Starting and Absent is final for
//     it: the next run of the Domain is a new generation.
//   - A direct existing-process slot (Network RS, Helper RS, Sandbox HC)
//     may be recorded Committed without staging only in the write that
//     creates the role snapshot ("enter a newly created dependent-role
//     snapshot directly"); afterwards it follows Unassigned, Staged,
//     Committed like every acquired child edge. A Session Terminal's HC
//     slot, which has no None snapshot, may enter Committed directly from
//     Unassigned while the terminal is in Intent.
//   - "Current" ownership means an identity from the current boot: every
//     identity written now, and every identity an active state relies on,
//     must carry the boot ID the Store was opened under. Identities from an
//     earlier boot stay readable in Intent and ReleaseIntent, where
//     recovery needs them.
//   - Active states are immutable (nothing is acquired after becoming
//     serviceable), as is a ReleaseIntent record.
//   - NetworkOwnership.readiness_evidence is stored as ReadinessEvidence:
//     the verbatim Postcard encoding of NetworkReadinessEvidence together
//     with a typed copy of its four fields, and the two must agree byte
//     for byte. The typed copy lets the store require that the evidence
//     names this Domain, the participant's generation, the generation's
//     network sidecar and the recorded readiness_fingerprint. That the
//     fingerprint covers the policy digest, namespace and RS identity is
//     the readiness verifier's part, not the store's.
//   - Mailbox states are Intent, Committed, ReleaseIntent and Clean; its
//     paths are planned values, fixed at creation and kept in Clean.
//   - session_anchor_id is a SHA-256 digest (of the session anchor public
//     key); the digest-valued physical fields (artifact IDs, source
//     identity, bundle and policy digests, fingerprints) are 32-byte
//     digests.
//   - Stored text (paths, names, container IDs) must be UTF-8 without NUL;
//     a non-UTF-8 path is refused with an error naming the field.
//
// Beside the schema's records, two Domain-wide workspace records live in
// a bucket of their own (workspace.go): IsolatedPaths, the sticky
// isolation set of the workspace view, and ReviewBaseline, the state of
// the files host tools execute at the start of the generation that took
// it. The first write makes the bucket; a store without it has no kept
// paths and no baseline, and nothing of the schema's records changes.
//
// Every stored row is verified when read (decoding is closed and
// canonical, then the record's shape is checked: VerifyParticipant,
// VerifySessionTerminal), so Tx.Scan doubles as the recovery scan.
package domainstore
