package protocol

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/pkg/postcard"
)

// TestVectors pins keys, IDs, digests, signature inputs and signatures
// derived from the fixed test seeds in testdata/vectors.txt.
func TestVectors(t *testing.T) {
	f := newFixture(t)
	issuer, coord, sandbox, anchor := issuerKey.Public(), coordinatorKey.Public(), sandboxKey.Public(), anchorKey.Public()
	manifestDigest := f.manifest.Digest()
	reqSHA := f.pending.RequestSHA256
	chunk := f.chunk(0, StreamStdout, []byte("ok\n"))
	signedChunk := mustSign(t, coordinatorKey, &chunk)
	vectors := []struct{ name, value string }{
		{"issuer-public-key", hex.EncodeToString(issuer[:])},
		{"coordinator-public-key", hex.EncodeToString(coord[:])},
		{"sandbox-public-key", hex.EncodeToString(sandbox[:])},
		{"session-anchor-public-key", hex.EncodeToString(anchor[:])},
		{"signature-input-mailbox-request-abc", hex.EncodeToString(SignatureInput(RecordMailboxRequest.Name(), []byte("abc")))},
		{"signature-input-mailbox-result-empty", hex.EncodeToString(SignatureInput(RecordMailboxResult.Name(), nil))},
		{"signature-input-trust-manifest-x", hex.EncodeToString(SignatureInput(SignatureTrustManifest, []byte{0x01}))},
		{"trust-manifest-signed-bytes", hex.EncodeToString(f.manifest.SignedBytes())},
		{"trust-manifest-signature", f.manifest.IssuerSignature.String()},
		{"trust-manifest-sha256", manifestDigest.String()},
		{"coordinator-credential-claim", hex.EncodeToString(f.coordinator.ClaimBytes())},
		{"coordinator-credential-id", f.coordinator.CredentialID.String()},
		{"coordinator-credential-signature", f.coordinator.IssuerSignature.String()},
		{"sandbox-credential-id", f.sandbox.CredentialID.String()},
		{"sandbox-credential-signature", f.sandbox.IssuerSignature.String()},
		{"capability-claim", hex.EncodeToString(f.capability.ClaimBytes())},
		{"capability-id", f.capability.CapabilityID.String()},
		{"capability-signature", f.capability.CoordinatorSignature.String()},
		{"mailbox-request-payload-length", fmt.Sprint(len(f.signedReq.PayloadBytes))},
		{"mailbox-request-sha256", reqSHA.String()},
		{"mailbox-request-signature", f.signedReq.Signature.String()},
		{"mailbox-result-chunk-payload-length", fmt.Sprint(len(signedChunk.PayloadBytes))},
		{"mailbox-result-chunk-signature", signedChunk.Signature.String()},
		{"mailbox-result-chunk-signed-record", hex.EncodeToString(postcard.Marshal(&signedChunk))},
	}
	path := filepath.Join("testdata", "vectors.txt")
	if *update {
		var b bytes.Buffer
		b.WriteString("# name value (hex unless a number); derived from the fixed test seeds\n")
		for _, v := range vectors {
			fmt.Fprintf(&b, "%s %s\n", v.name, v.value)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		want[name] = value
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			if want[v.name] != v.value {
				t.Fatalf("got %s\nwant %s", v.value, want[v.name])
			}
		})
	}
}

// The signature input layout, checked by hand: prefix, name, u64be length.
func TestSignatureInputLayout(t *testing.T) {
	got := SignatureInput("mailbox-request", []byte("abc"))
	want := "lazaret/v1/mailbox-request" + "\x00\x00\x00\x00\x00\x00\x00\x03" + "abc"
	if string(got) != want {
		t.Fatalf("SignatureInput = %q, want %q", got, want)
	}
	// "mailbox-result" is a prefix of two other names; the length's first
	// byte (0x00) keeps the inputs apart from their '-'.
	a := SignatureInput(RecordMailboxResult.Name(), []byte("-ack"))
	b := SignatureInput(RecordMailboxResultAck.Name(), nil)
	if bytes.HasPrefix(a, b[:len(b)-8]) && a[len(b)-8] == '-' {
		t.Fatal("mailbox-result input can read as mailbox-result-ack")
	}
	for k := RecordKind(0); k < numRecordKinds; k++ {
		if n := k.Name(); n != strings.ToLower(n) || strings.ContainsAny(n, " _") {
			t.Fatalf("record name %q is not lower-kebab", n)
		}
	}
}
