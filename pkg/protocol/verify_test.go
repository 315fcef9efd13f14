package protocol

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// signedKind is one of the six signed record kinds with the verifier its
// receiver runs.
type signedKind struct {
	name   string
	signed func(t testing.TB, f *fixture) SignedProtocolRecord
	verify func(f *fixture, rec *SignedProtocolRecord, guard *ReplayGuard) error
}

func signedKinds() []signedKind {
	return []signedKind{
		{"mailbox-request",
			func(t testing.TB, f *fixture) SignedProtocolRecord { return f.signedReq },
			func(f *fixture, rec *SignedProtocolRecord, guard *ReplayGuard) error {
				_, err := f.verifier.VerifyRequest(rec, f.sessions, guard)
				return err
			}},
		{"mailbox-cancellation",
			func(t testing.TB, f *fixture) SignedProtocolRecord {
				c := f.cancellation()
				return mustSign(t, sandboxKey, &c)
			},
			func(f *fixture, rec *SignedProtocolRecord, _ *ReplayGuard) error {
				_, err := f.verifier.VerifyCancellation(rec, f.sessions)
				return err
			}},
		{"mailbox-result-ack",
			func(t testing.TB, f *fixture) SignedProtocolRecord { a := f.ack(); return mustSign(t, sandboxKey, &a) },
			func(f *fixture, rec *SignedProtocolRecord, _ *ReplayGuard) error {
				_, err := f.verifier.VerifyResultAck(rec, &f.pending)
				return err
			}},
		{"developer-decision",
			func(t testing.TB, f *fixture) SignedProtocolRecord {
				d := f.decision()
				return mustSign(t, anchorKey, &d)
			},
			func(f *fixture, rec *SignedProtocolRecord, _ *ReplayGuard) error {
				_, err := f.verifier.VerifyDecision(rec, &f.pending)
				return err
			}},
		{"mailbox-result",
			func(t testing.TB, f *fixture) SignedProtocolRecord {
				r := f.result()
				return mustSign(t, coordinatorKey, &r)
			},
			func(f *fixture, rec *SignedProtocolRecord, _ *ReplayGuard) error {
				_, err := f.verifier.VerifyResult(rec, &f.pending)
				return err
			}},
		{"mailbox-result-chunk",
			func(t testing.TB, f *fixture) SignedProtocolRecord {
				c := f.chunk(0, StreamStdout, []byte("ok\n"))
				return mustSign(t, coordinatorKey, &c)
			},
			func(f *fixture, rec *SignedProtocolRecord, _ *ReplayGuard) error {
				_, err := f.verifier.VerifyResultChunk(rec, &f.pending)
				return err
			}},
	}
}

// decodeAndVerify is the receiver's whole path from file bytes.
func decodeAndVerify(f *fixture, k signedKind, b []byte, guard *ReplayGuard) error {
	var rec SignedProtocolRecord
	if err := Decode(b, &rec); err != nil {
		return err
	}
	return k.verify(f, &rec, guard)
}

func TestSignedRecordsVerify(t *testing.T) {
	f := newFixture(t)
	for _, k := range signedKinds() {
		t.Run(k.name, func(t *testing.T) {
			rec := k.signed(t, f)
			if rec.Kind.Name() != k.name {
				t.Fatalf("kind %v, want %s", rec.Kind, k.name)
			}
			if err := decodeAndVerify(f, k, postcard.Marshal(&rec), NewReplayGuard(0)); err != nil {
				t.Fatalf("valid record rejected: %v", err)
			}
		})
	}
}

// Flipping any single bit of a valid signed record, envelope included,
// makes the receiver reject it.
func TestBitFlipsRejected(t *testing.T) {
	f := newFixture(t)
	for _, k := range signedKinds() {
		t.Run(k.name, func(t *testing.T) {
			rec := k.signed(t, f)
			b := postcard.Marshal(&rec)
			kinds := map[Kind]int{}
			for bit := 0; bit < 8*len(b); bit++ {
				flipped := bytes.Clone(b)
				flipped[bit/8] ^= 1 << (bit % 8)
				err := decodeAndVerify(f, k, flipped, NewReplayGuard(0))
				if err == nil {
					t.Fatalf("flip of bit %d (byte %d) accepted", bit, bit/8)
				}
				var pe *Error
				if errors.As(err, &pe) {
					kinds[pe.Kind]++
				} else {
					kinds[KindMalformed]++
				}
			}
			if kinds[KindSignature] == 0 {
				t.Fatalf("no flip failed the signature check: %v", kinds)
			}
			t.Logf("%d bits, failures by kind: %v", 8*len(b), kinds)
		})
	}
}

func TestReplayRejected(t *testing.T) {
	f := newFixture(t)
	guard := NewReplayGuard(0)
	if _, err := f.verifier.VerifyRequest(&f.signedReq, f.sessions, guard); err != nil {
		t.Fatalf("first use: %v", err)
	}
	_, err := f.verifier.VerifyRequest(&f.signedReq, f.sessions, guard)
	if !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v, want ErrReplay", err)
	}
	// A new request ID in the same generation is fine; so is the same ID
	// after its generation was forgotten.
	r2 := f.request
	r2.RequestID = ids.RequestID(filled16(0xe1))
	s2 := mustSign(t, sandboxKey, &r2)
	if _, err := f.verifier.VerifyRequest(&s2, f.sessions, guard); err != nil {
		t.Fatalf("fresh ID: %v", err)
	}
	if guard.Len() != 2 || !guard.Seen(f.gen.GenerationID, r2.RequestID) {
		t.Fatalf("guard holds %d IDs", guard.Len())
	}
	guard.ForgetGeneration(f.gen.GenerationID)
	if guard.Len() != 0 {
		t.Fatalf("ForgetGeneration left %d IDs", guard.Len())
	}
	if _, err := f.verifier.VerifyRequest(nil, nil, nil); err == nil {
		t.Fatal("nil record accepted")
	}
}

func TestReplayGuardCapacity(t *testing.T) {
	g := NewReplayGuard(2)
	gen := ids.GenerationID(filled16(1))
	for i := byte(0); i < 2; i++ {
		if err := g.Consume(gen, ids.RequestID(filled16(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Consume(gen, ids.RequestID(filled16(9))); !errors.Is(err, ErrReplayCapacity) {
		t.Fatalf("full guard: %v, want ErrReplayCapacity", err)
	}
	if err := g.Consume(gen, ids.RequestID(filled16(1))); !errors.Is(err, ErrReplay) {
		t.Fatalf("full guard, replayed ID: %v, want ErrReplay", err)
	}
	// The same request ID in another generation is a different key.
	g.ForgetGeneration(gen)
	if err := g.Consume(ids.GenerationID(filled16(2)), ids.RequestID(filled16(1))); err != nil {
		t.Fatal(err)
	}
}

func TestVerifierRejects(t *testing.T) {
	f := newFixture(t)
	otherGen := f.gen
	otherGen.GenerationID = ids.GenerationID(filled16(0xf1))
	otherBinding := f.binding
	otherBinding.SessionID = ids.SessionID(filled16(0xc1))

	tests := []struct {
		name string
		run  func(t *testing.T) error
		want error
	}{
		{"request signed by the coordinator key", func(t *testing.T) error {
			s := mustSign(t, coordinatorKey, &f.request)
			_, err := f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrSignature},
		{"request with the kind of a cancellation", func(t *testing.T) error {
			s := f.signedReq
			s.Kind = RecordMailboxCancellation
			_, err := f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrRecordKind},
		{"request signature under another kind's name", func(t *testing.T) error {
			s := f.signedReq
			s.Signature = sandboxKey.Sign(RecordMailboxCancellation.Name(), s.PayloadBytes)
			_, err := f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrSignature},
		{"request naming another sandbox credential", func(t *testing.T) error {
			r := f.request
			r.SandboxCredentialID = f.coordinator.CredentialID
			s := mustSign(t, sandboxKey, &r)
			_, err := f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrCredential},
		{"request of another generation", func(t *testing.T) error {
			r := f.request
			r.SessionBinding.GenerationIdentity = otherGen
			s := mustSign(t, sandboxKey, &r)
			_, err := f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrGeneration},
		{"request from an unregistered session", func(t *testing.T) error {
			c, err := IssueSessionCapability(coordinatorKey, &f.coordinator, &f.sandbox, otherBinding)
			if err != nil {
				t.Fatal(err)
			}
			r := f.request
			r.SessionBinding, r.SessionCapability = otherBinding, c
			s := mustSign(t, sandboxKey, &r)
			_, err = f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrBinding},
		{"request whose capability is for another session", func(t *testing.T) error {
			c, err := IssueSessionCapability(coordinatorKey, &f.coordinator, &f.sandbox, otherBinding)
			if err != nil {
				t.Fatal(err)
			}
			r := f.request
			r.SessionCapability = c
			s := mustSign(t, sandboxKey, &r)
			_, err = f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrCapability},
		{"capability signed by a stranger", func(t *testing.T) error {
			r := f.request
			r.SessionCapability.CoordinatorSignature = strangerKey.Sign(SignatureSessionRequestCapability, r.SessionCapability.SignedBytes())
			s := mustSign(t, sandboxKey, &r)
			_, err := f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrCapability},
		{"capability with a wrong ID", func(t *testing.T) error {
			r := f.request
			r.SessionCapability.CapabilityID[0] ^= 1
			r.SessionCapability.CoordinatorSignature = coordinatorKey.Sign(SignatureSessionRequestCapability, r.SessionCapability.SignedBytes())
			s := mustSign(t, sandboxKey, &r)
			_, err := f.verifier.VerifyRequest(&s, f.sessions, NewReplayGuard(0))
			return err
		}, ErrCapability},
		{"request with a nil guard", func(t *testing.T) error {
			_, err := f.verifier.VerifyRequest(&f.signedReq, f.sessions, nil)
			return err
		}, ErrReplay},
		{"decision signed by the sandbox key", func(t *testing.T) error {
			d := f.decision()
			s := mustSign(t, sandboxKey, &d)
			_, err := f.verifier.VerifyDecision(&s, &f.pending)
			return err
		}, ErrSignature},
		{"decision over another request digest", func(t *testing.T) error {
			d := f.decision()
			d.RequestSHA256[0] ^= 1
			s := mustSign(t, anchorKey, &d)
			_, err := f.verifier.VerifyDecision(&s, &f.pending)
			return err
		}, ErrRequestDigest},
		{"decision for another request", func(t *testing.T) error {
			d := f.decision()
			d.RequestID = ids.RequestID(filled16(0xe1))
			s := mustSign(t, anchorKey, &d)
			_, err := f.verifier.VerifyDecision(&s, &f.pending)
			return err
		}, ErrRequest},
		{"result signed by the sandbox key", func(t *testing.T) error {
			r := f.result()
			s := mustSign(t, sandboxKey, &r)
			_, err := f.verifier.VerifyResult(&s, &f.pending)
			return err
		}, ErrSignature},
		{"result naming another coordinator credential", func(t *testing.T) error {
			r := f.result()
			r.CoordinatorCredentialID = f.sandbox.CredentialID
			s := mustSign(t, coordinatorKey, &r)
			_, err := f.verifier.VerifyResult(&s, &f.pending)
			return err
		}, ErrCredential},
		{"chunk for another session binding", func(t *testing.T) error {
			c := f.chunk(0, StreamStdout, []byte("x"))
			c.SessionBinding = otherBinding
			s := mustSign(t, coordinatorKey, &c)
			_, err := f.verifier.VerifyResultChunk(&s, &f.pending)
			return err
		}, ErrBinding},
		{"ack with a wrong request digest", func(t *testing.T) error {
			a := f.ack()
			a.RequestSHA256 = sha256.Sum256([]byte("other"))
			s := mustSign(t, sandboxKey, &a)
			_, err := f.verifier.VerifyResultAck(&s, &f.pending)
			return err
		}, ErrRequestDigest},
		{"cancellation signed by the session anchor", func(t *testing.T) error {
			c := f.cancellation()
			s := mustSign(t, anchorKey, &c)
			_, err := f.verifier.VerifyCancellation(&s, f.sessions)
			return err
		}, ErrSignature},
		{"verifier with a wrong manifest digest", func(t *testing.T) error {
			_, err := NewVerifier(f.manifest, ids.Digest{1}, f.coordinator, f.sandbox)
			return err
		}, ErrTrustManifest},
		{"verifier with roles swapped", func(t *testing.T) error {
			_, err := NewVerifier(f.manifest, f.manifest.Digest(), f.sandbox, f.coordinator)
			return err
		}, ErrCredential},
		{"credential issued by a stranger", func(t *testing.T) error {
			c, err := IssueProtocolCredential(strangerKey, f.gen, RoleAgentSandbox, sandboxKey.Public())
			if err != nil {
				t.Fatal(err)
			}
			return VerifyProtocolCredential(&c, &f.manifest, RoleAgentSandbox)
		}, ErrSignature},
		{"credential with a wrong ID", func(t *testing.T) error {
			c := f.sandbox
			c.CredentialID[5] ^= 1
			return VerifyProtocolCredential(&c, &f.manifest, RoleAgentSandbox)
		}, ErrCredential},
		{"credential with a wrong subject", func(t *testing.T) error {
			c := f.sandbox
			c.SubjectID = ids.ID(f.gen.CoordinatorID)
			c.CredentialID = c.ComputeID()
			c.IssuerSignature = issuerKey.Sign(SignatureProtocolCredential, c.SignedBytes())
			return VerifyProtocolCredential(&c, &f.manifest, RoleAgentSandbox)
		}, ErrCredential},
		{"manifest with a forged signature", func(t *testing.T) error {
			m := f.manifest
			m.IssuerSignature[0] ^= 1
			return VerifyTrustManifest(&m)
		}, ErrSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run(t)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
		})
	}
}

func TestResultCollector(t *testing.T) {
	f := newFixture(t)
	result := f.result()
	c0 := f.chunk(0, StreamStdout, []byte("ok\n"))
	c1 := f.chunk(1, StreamStderr, []byte("warn\n"))

	c := NewResultCollector(f.pending)
	if c.HighestContiguous() != nil {
		t.Fatal("HighestContiguous before any chunk is not nil")
	}
	if err := c.Add(&c1); !errors.Is(err, ErrSequence) {
		t.Fatalf("chunk 1 first: %v, want ErrSequence", err)
	}
	if err := c.Add(&c0); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(&result); !errors.Is(err, ErrChunkCount) {
		t.Fatalf("missing chunk: %v, want ErrChunkCount", err)
	}
	if err := c.Add(&c0); !errors.Is(err, ErrSequence) {
		t.Fatalf("duplicate chunk 0: %v, want ErrSequence", err)
	}
	if err := c.Add(&c1); err != nil {
		t.Fatal(err)
	}
	if h := c.HighestContiguous(); h == nil || *h != 1 {
		t.Fatalf("HighestContiguous = %v", h)
	}
	if err := c.Check(&result); err != nil {
		t.Fatalf("complete result: %v", err)
	}
	bad := result
	bad.StderrSHA256[0] ^= 1
	if err := c.Check(&bad); !errors.Is(err, ErrStreamDigest) {
		t.Fatalf("wrong stderr digest: %v, want ErrStreamDigest", err)
	}
	bad = result
	bad.StdoutSHA256 = sha256.Sum256([]byte("ok\nwarn\n"))
	if err := c.Check(&bad); !errors.Is(err, ErrStreamDigest) {
		t.Fatalf("merged streams: %v, want ErrStreamDigest", err)
	}
	other := f.chunk(2, StreamStdout, []byte("x"))
	other.RequestID = ids.RequestID(filled16(0xe1))
	if err := c.Add(&other); !errors.Is(err, ErrRequest) {
		t.Fatalf("chunk of another request: %v, want ErrRequest", err)
	}
	// An empty result: no chunks, digests of nothing.
	empty := NewResultCollector(f.pending)
	r0 := result
	r0.ChunkCount = 0
	r0.StdoutSHA256, r0.StderrSHA256 = sha256.Sum256(nil), sha256.Sum256(nil)
	if err := empty.Check(&r0); err != nil {
		t.Fatalf("empty result: %v", err)
	}
}

// The guest's whole path: a bundle verifies, yields a verifier, and the
// verifier accepts what the coordinator signs.
func TestBundleVerifier(t *testing.T) {
	f := newFixture(t)
	bundle, err := NewSandboxCredentialBundle(issuerKey, f.manifest, f.coordinator, sandboxKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(&bundle)
	if err != nil {
		t.Fatal(err)
	}
	var back SandboxCredentialBundle
	if err := Decode(b, &back); err != nil {
		t.Fatal(err)
	}
	v, err := back.Verifier(f.manifest.Digest())
	if err != nil {
		t.Fatal(err)
	}
	r := f.result()
	s := mustSign(t, coordinatorKey, &r)
	if _, err := v.VerifyResult(&s, &f.pending); err != nil {
		t.Fatal(err)
	}
	// A bundle whose key is not the sandbox credential's is refused.
	back.SandboxPrivateKey = strangerKey
	if err := back.Verify(f.manifest.Digest()); !errors.Is(err, ErrCredential) {
		t.Fatalf("foreign key: %v, want ErrCredential", err)
	}
	if _, err := NewSandboxCredentialBundle(strangerKey, f.manifest, f.coordinator, sandboxKey); !errors.Is(err, ErrCredential) {
		t.Fatalf("stranger issuer: %v, want ErrCredential", err)
	}
}
