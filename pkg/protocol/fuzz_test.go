package protocol

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/postcard"
)

// fuzzDecode feeds data[1:] to the decoder of the record data[0] selects
// among the records whose names have one of the prefixes. Whatever decodes
// must validate and re-encode to exactly the input.
func fuzzDecode(f *testing.F, prefixes ...string) {
	var recs []namedRecord
	for _, nr := range allRecords(f) {
		for _, p := range prefixes {
			if strings.HasPrefix(nr.name, p) {
				recs = append(recs, nr)
				break
			}
		}
	}
	if len(recs) == 0 {
		f.Fatalf("no records for %v", prefixes)
	}
	for i, nr := range recs {
		b, err := Encode(nr.rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{byte(i)}, b...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		nr := recs[int(data[0])%len(recs)]
		in := data[1:]
		r := nr.fresh()
		if err := Decode(in, r); err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("%s: decoded record fails validation: %v", nr.name, err)
		}
		out, err := Encode(r)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%s: % x re-encodes to % x (%v)", nr.name, in, out, err)
		}
	})
}

func FuzzDecodeTerminal(f *testing.F) {
	fuzzDecode(f, "terminal-", "session-", "non-interactive-", "interactive-")
}

func FuzzDecodeIdentity(f *testing.F) {
	fuzzDecode(f, "generation-identity", "trust-manifest", "tls-credential", "protocol-",
		"sandbox-credential-bundle", "session-binding", "session-request-capability")
}

func FuzzDecodeControl(f *testing.F) {
	fuzzDecode(f, "client-enrollment-", "session-registration-", "control-")
}

func FuzzDecodeMailbox(f *testing.F) {
	fuzzDecode(f, "mailbox-", "developer-decision", "signed-protocol-record")
}

// fuzzVerify feeds envelope bytes to one receiver's whole path. Signatures
// cannot be forged, so anything accepted must carry the seed's payload and
// be its canonical encoding.
func fuzzVerify(f *testing.F, kind string) {
	fx := newFixture(f)
	var k signedKind
	for _, sk := range signedKinds() {
		if sk.name == kind {
			k = sk
		}
	}
	rec := k.signed(f, fx)
	valid := postcard.Marshal(&rec)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		var got SignedProtocolRecord
		if err := Decode(data, &got); err != nil {
			return
		}
		if err := k.verify(fx, &got, NewReplayGuard(0)); err != nil {
			return
		}
		if !bytes.Equal(got.PayloadBytes, rec.PayloadBytes) || !bytes.Equal(data, valid) {
			t.Fatalf("accepted a record other than the signed one: % x", data)
		}
	})
}

func FuzzVerifyRequest(f *testing.F)      { fuzzVerify(f, "mailbox-request") }
func FuzzVerifyCancellation(f *testing.F) { fuzzVerify(f, "mailbox-cancellation") }
func FuzzVerifyResultAck(f *testing.F)    { fuzzVerify(f, "mailbox-result-ack") }
func FuzzVerifyDecision(f *testing.F)     { fuzzVerify(f, "developer-decision") }
func FuzzVerifyResult(f *testing.F)       { fuzzVerify(f, "mailbox-result") }
func FuzzVerifyResultChunk(f *testing.F)  { fuzzVerify(f, "mailbox-result-chunk") }

// FuzzVerifyCredentials decodes a protocol credential, a capability or a
// trust manifest (data[0] selects) and verifies it against the fixture's
// trust; only the fixture's own values may pass.
func FuzzVerifyCredentials(f *testing.F) {
	fx := newFixture(f)
	for i, r := range []Record{&fx.sandbox, &fx.capability, &fx.manifest} {
		f.Add(append([]byte{byte(i)}, postcard.Marshal(r)...))
	}
	f.Add(append([]byte{0}, postcard.Marshal(&fx.coordinator)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		in := data[1:]
		switch data[0] % 3 {
		case 0:
			var c ProtocolCredential
			if Decode(in, &c) != nil {
				return
			}
			okS := VerifyProtocolCredential(&c, &fx.manifest, RoleAgentSandbox) == nil
			okC := VerifyProtocolCredential(&c, &fx.manifest, RoleSessionCoordinator) == nil
			if okS && c != fx.sandbox || okC && c != fx.coordinator {
				t.Fatalf("accepted a foreign credential: %+v", c)
			}
		case 1:
			var c SessionRequestCapability
			if Decode(in, &c) != nil {
				return
			}
			if VerifyCapability(&c, &fx.coordinator, &fx.sandbox) == nil && c != fx.capability {
				t.Fatalf("accepted a foreign capability: %+v", c)
			}
		case 2:
			var m TrustManifest
			if Decode(in, &m) != nil {
				return
			}
			if _, err := NewVerifier(m, fx.manifest.Digest(), fx.coordinator, fx.sandbox); err == nil && m != fx.manifest {
				t.Fatalf("accepted a foreign manifest: %+v", m)
			}
		}
	})
}

// FuzzIssueClient feeds arbitrary CSR bytes to the enrollment check; only
// a CSR signed by its key and naming the CLI ID may yield a certificate,
// and the certificate must then verify.
func FuzzIssueClient(f *testing.F) {
	gen := testGeneration()
	now := time.Now()
	ca, err := NewCA(rand.Reader, gen, now)
	if err != nil {
		f.Fatal(err)
	}
	csr, err := NewClientCSR(fixtureCLI(), anchorKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(csr)
	f.Add(csr[:len(csr)-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		req := ClientEnrollmentRequest{GenerationIdentity: gen, CLIID: fixtureCLI(), CertificateSigningRequestDER: data}
		cred, err := ca.IssueClient(rand.Reader, &req, now)
		if err != nil {
			return
		}
		if err := VerifyTLSCredential(&cred, ca.CertificateDER(), gen, TLSRoleClientCLI, now); err != nil {
			t.Fatalf("issued credential does not verify: %v", err)
		}
	})
}
