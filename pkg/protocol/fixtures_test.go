package protocol

import (
	"crypto/sha256"
	"testing"

	"lazaret.dev/pkg/ids"
)

// Fixed test keys: seed byte i is i + base, so every vector is reproducible
// (Ed25519 signing is deterministic).
func testKey(base byte) PrivateKey {
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(i) + base
	}
	return NewPrivateKey(seed)
}

var (
	issuerKey      = testKey(0x10)
	coordinatorKey = testKey(0x40)
	sandboxKey     = testKey(0x70)
	anchorKey      = testKey(0xa0)
	strangerKey    = testKey(0xd0)
)

func filled16(b byte) [16]byte {
	var a [16]byte
	for i := range a {
		a[i] = b + byte(i)
	}
	return a
}

func filled32(b byte) [32]byte {
	var a [32]byte
	for i := range a {
		a[i] = b + byte(i)
	}
	return a
}

func fixtureCLI() ids.CLIID { return ids.CLIID(filled16(0x71)) }

func testGeneration() GenerationIdentity {
	return GenerationIdentity{
		AgentProfile:             "claude",
		DomainID:                 ids.DomainID(filled32(0x01)),
		GenerationID:             ids.GenerationID(filled16(0x21)),
		ConfigurationFingerprint: ids.Digest(filled32(0x31)),
		CoordinatorID:            ids.CoordinatorID(filled16(0x51)),
		SandboxID:                ids.SandboxID(filled16(0x61)),
	}
}

// fakeCADER stands in for a CA certificate where only the codec matters.
var fakeCADER = []byte{0x30, 0x03, 0x02, 0x01, 0x01}

type fixture struct {
	gen         GenerationIdentity
	manifest    TrustManifest
	coordinator ProtocolCredential
	sandbox     ProtocolCredential
	binding     SessionBinding
	capability  SessionRequestCapability
	verifier    *Verifier
	request     MailboxRequest
	signedReq   SignedProtocolRecord
	pending     PendingRequest
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{gen: testGeneration()}
	var err error
	if f.manifest, err = NewTrustManifest(f.gen, fakeCADER, issuerKey); err != nil {
		t.Fatal(err)
	}
	if f.coordinator, err = IssueProtocolCredential(issuerKey, f.gen, RoleSessionCoordinator, coordinatorKey.Public()); err != nil {
		t.Fatal(err)
	}
	if f.sandbox, err = IssueProtocolCredential(issuerKey, f.gen, RoleAgentSandbox, sandboxKey.Public()); err != nil {
		t.Fatal(err)
	}
	f.binding = SessionBinding{
		GenerationIdentity:     f.gen,
		CLIID:                  ids.CLIID(filled16(0x71)),
		SessionID:              ids.SessionID(filled16(0x81)),
		SessionAnchorPublicKey: anchorKey.Public(),
	}
	if f.capability, err = IssueSessionCapability(coordinatorKey, &f.coordinator, &f.sandbox, f.binding); err != nil {
		t.Fatal(err)
	}
	if f.verifier, err = NewVerifier(f.manifest, f.manifest.Digest(), f.coordinator, f.sandbox); err != nil {
		t.Fatal(err)
	}
	f.request = MailboxRequest{
		SessionBinding:      f.binding,
		RequestID:           ids.RequestID(filled16(0x91)),
		SessionCapability:   f.capability,
		SandboxCredentialID: f.sandbox.CredentialID,
		CommandArgv:         []string{"/usr/bin/git", "push", "origin", "main"},
		Justification:       "publish the fix",
	}
	if f.signedReq, err = Sign(sandboxKey, &f.request); err != nil {
		t.Fatal(err)
	}
	f.pending = NewPendingRequest(&f.signedReq, &f.request)
	return f
}

func (f *fixture) sessions(id ids.SessionID) (SessionBinding, bool) {
	if id == f.binding.SessionID {
		return f.binding, true
	}
	return SessionBinding{}, false
}

func u8p(v uint8) *uint8    { return &v }
func u32p(v uint32) *uint32 { return &v }

func (f *fixture) cancellation() MailboxCancellation {
	return MailboxCancellation{
		SessionBinding:      f.binding,
		RequestID:           f.request.RequestID,
		SessionCapability:   f.capability,
		SandboxCredentialID: f.sandbox.CredentialID,
	}
}

func (f *fixture) ack() MailboxResultAck {
	return MailboxResultAck{
		SessionBinding:            f.binding,
		RequestID:                 f.request.RequestID,
		RequestSHA256:             f.pending.RequestSHA256,
		SessionCapability:         f.capability,
		SandboxCredentialID:       f.sandbox.CredentialID,
		HighestContiguousSequence: u32p(1),
	}
}

func (f *fixture) decision() DeveloperDecision {
	return DeveloperDecision{
		SessionBinding:      f.binding,
		RequestID:           f.request.RequestID,
		RequestSHA256:       f.pending.RequestSHA256,
		Decision:            DecisionApprove,
		ApprovedCommandArgv: []string{"/usr/bin/git", "push", "origin", "main"},
	}
}

func (f *fixture) chunk(seq uint32, stream ResultStream, b []byte) MailboxResultChunk {
	return MailboxResultChunk{
		SessionBinding:          f.binding,
		RequestID:               f.request.RequestID,
		RequestSHA256:           f.pending.RequestSHA256,
		CoordinatorCredentialID: f.coordinator.CredentialID,
		Sequence:                seq,
		Stream:                  stream,
		Bytes:                   b,
	}
}

// result is the result of the two chunks "ok\n" (stdout) and "warn\n"
// (stderr).
func (f *fixture) result() MailboxResult {
	return MailboxResult{
		SessionBinding:          f.binding,
		RequestID:               f.request.RequestID,
		RequestSHA256:           f.pending.RequestSHA256,
		CoordinatorCredentialID: f.coordinator.CredentialID,
		Outcome:                 OutcomeCompleted,
		ExitCode:                u8p(0),
		ChunkCount:              2,
		StdoutSHA256:            sha256.Sum256([]byte("ok\n")),
		StderrSHA256:            sha256.Sum256([]byte("warn\n")),
	}
}

func mustSign(t testing.TB, key PrivateKey, r SignedRecord) SignedProtocolRecord {
	t.Helper()
	s, err := Sign(key, r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
