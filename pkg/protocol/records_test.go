package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

type namedRecord struct {
	name  string
	rec   Record
	fresh func() Record
}

func fakeTLSCredential(gen GenerationIdentity, role TLSRole, subject ids.ID) TLSCredential {
	der := []byte{0x30, 0x03, 0x02, 0x01, byte(role) + 2}
	return TLSCredential{GenerationIdentity: gen, Role: role, SubjectID: subject, CertificateDER: der, CertificateSHA256: sha256.Sum256(der)}
}

// allRecords returns one valid value of every serialized shape (and of each
// union variant and option state).
func allRecords(t testing.TB) []namedRecord {
	f := newFixture(t)
	gen := f.gen
	sid := f.binding.SessionID
	coordTLS := fakeTLSCredential(gen, TLSRoleSessionCoordinator, ids.ID(gen.CoordinatorID))
	cliTLS := fakeTLSCredential(gen, TLSRoleClientCLI, ids.ID(f.binding.CLIID))
	pub := ProtocolPublicationIdentity{
		GenerationIdentity:              gen,
		TLSCACertificateDER:             fakeCADER,
		TrustManifestSHA256:             f.manifest.Digest(),
		CoordinatorTLSCertificateSHA256: coordTLS.CertificateSHA256,
	}
	enroll := ClientEnrollmentRequest{GenerationIdentity: gen, CLIID: f.binding.CLIID, CertificateSigningRequestDER: []byte{0x30, 0x02, 0x05, 0x00}}
	enrolled := ClientEnrollmentResponse{Credential: cliTLS}
	register := SessionRegistrationRequest{SessionBinding: f.binding}
	registered := SessionRegistrationResponse{SessionCapability: f.capability}
	bundle, err := NewSandboxCredentialBundle(issuerKey, f.manifest, f.coordinator, sandboxKey)
	if err != nil {
		t.Fatal(err)
	}
	execute := NonInteractiveSessionRequest{SessionID: sid, Argv: []string{"make", "test"}}
	resize := TerminalResize{SessionID: sid, Rows: 50, Columns: 200, PixelWidth: 1600, PixelHeight: 0}
	interactive := InteractiveSessionRequest{SessionID: sid, Argv: []string{"/bin/bash", "-l"}, InitialSize: resize}
	input := TerminalInput{SessionID: sid, Bytes: []byte("ls\r")}
	signal := TerminalSignal{SessionID: sid, Signal: SignalSuspend}
	closeEv := SessionClose{SessionID: sid}
	output := TerminalOutput{SessionID: sid, Bytes: []byte("\x1b[1mhi\x1b[0m\r\n")}
	exited := SessionExit{SessionID: sid, Outcome: ExitExited, ExitCode: u8p(3)}
	lost := SessionExit{SessionID: sid, Outcome: ExitRuntimeLost}
	niOut := NonInteractiveOutput{SessionID: sid, Bytes: []byte("PASS\n")}
	prompt := TerminalPrompt{
		SessionID: sid, RequestID: f.request.RequestID, RequestSHA256: f.pending.RequestSHA256,
		AgentProfile: gen.AgentProfile, CommandArgv: f.request.CommandArgv, Justification: f.request.Justification,
	}
	decision := f.decision()
	signedDecision := mustSign(t, anchorKey, &decision)
	deny := DeveloperDecision{SessionBinding: f.binding, RequestID: f.request.RequestID, RequestSHA256: f.pending.RequestSHA256, Decision: DecisionDeny}
	cancel := f.cancellation()
	ack := f.ack()
	ackNone := f.ack()
	ackNone.HighestContiguousSequence = nil
	result := f.result()
	failed := f.result()
	failed.Outcome, failed.ExitCode, failed.ChunkCount = OutcomeTimedOut, nil, 0
	chunk := f.chunk(0, StreamStdout, []byte("ok\n"))
	termMsgOut := SessionTerminalMessage{Kind: MessageOutput, Output: &output}
	termMsgExit := SessionTerminalMessage{Kind: MessageExit, Exit: &exited}

	n := func(name string, r Record, fresh func() Record) namedRecord { return namedRecord{name, r, fresh} }
	return []namedRecord{
		n("generation-identity", &gen, func() Record { return new(GenerationIdentity) }),
		n("trust-manifest", &f.manifest, func() Record { return new(TrustManifest) }),
		n("tls-credential", &coordTLS, func() Record { return new(TLSCredential) }),
		n("protocol-publication-identity", &pub, func() Record { return new(ProtocolPublicationIdentity) }),
		n("client-enrollment-request", &enroll, func() Record { return new(ClientEnrollmentRequest) }),
		n("client-enrollment-response", &enrolled, func() Record { return new(ClientEnrollmentResponse) }),
		n("session-registration-request", &register, func() Record { return new(SessionRegistrationRequest) }),
		n("session-registration-response", &registered, func() Record { return new(SessionRegistrationResponse) }),
		n("control-request-enroll", &ControlRequest{Kind: ControlEnroll, Enroll: &enroll}, func() Record { return new(ControlRequest) }),
		n("control-request-register", &ControlRequest{Kind: ControlRegister, Register: &register}, func() Record { return new(ControlRequest) }),
		n("control-request-execute", &ControlRequest{Kind: ControlExecute, Execute: &execute}, func() Record { return new(ControlRequest) }),
		n("control-request-execute-interactive", &ControlRequest{Kind: ControlExecuteInteractive, ExecuteInteractive: &interactive}, func() Record { return new(ControlRequest) }),
		n("control-response-enrolled", &ControlResponse{Kind: ControlEnrolled, Enrolled: &enrolled}, func() Record { return new(ControlResponse) }),
		n("control-response-registered", &ControlResponse{Kind: ControlRegistered, Registered: &registered}, func() Record { return new(ControlResponse) }),
		n("sandbox-credential-bundle", &bundle, func() Record { return new(SandboxCredentialBundle) }),
		n("protocol-credential", &f.coordinator, func() Record { return new(ProtocolCredential) }),
		n("session-binding", &f.binding, func() Record { return new(SessionBinding) }),
		n("session-request-capability", &f.capability, func() Record { return new(SessionRequestCapability) }),
		n("signed-protocol-record", &f.signedReq, func() Record { return new(SignedProtocolRecord) }),
		n("mailbox-request", &f.request, func() Record { return new(MailboxRequest) }),
		n("mailbox-cancellation", &cancel, func() Record { return new(MailboxCancellation) }),
		n("mailbox-result-ack", &ack, func() Record { return new(MailboxResultAck) }),
		n("mailbox-result-ack-none", &ackNone, func() Record { return new(MailboxResultAck) }),
		n("developer-decision-approve", &decision, func() Record { return new(DeveloperDecision) }),
		n("developer-decision-deny", &deny, func() Record { return new(DeveloperDecision) }),
		n("mailbox-result", &result, func() Record { return new(MailboxResult) }),
		n("mailbox-result-timed-out", &failed, func() Record { return new(MailboxResult) }),
		n("mailbox-result-chunk", &chunk, func() Record { return new(MailboxResultChunk) }),
		n("terminal-input", &input, func() Record { return new(TerminalInput) }),
		n("terminal-resize", &resize, func() Record { return new(TerminalResize) }),
		n("terminal-signal", &signal, func() Record { return new(TerminalSignal) }),
		n("session-close", &closeEv, func() Record { return new(SessionClose) }),
		n("session-terminal-event-input", &SessionTerminalEvent{Kind: EventInput, Input: &input}, func() Record { return new(SessionTerminalEvent) }),
		n("session-terminal-event-resize", &SessionTerminalEvent{Kind: EventResize, Resize: &resize}, func() Record { return new(SessionTerminalEvent) }),
		n("session-terminal-event-signal", &SessionTerminalEvent{Kind: EventSignal, Signal: &signal}, func() Record { return new(SessionTerminalEvent) }),
		n("session-terminal-event-close", &SessionTerminalEvent{Kind: EventClose, Close: &closeEv}, func() Record { return new(SessionTerminalEvent) }),
		n("terminal-output", &output, func() Record { return new(TerminalOutput) }),
		n("session-exit-exited", &exited, func() Record { return new(SessionExit) }),
		n("session-exit-runtime-lost", &lost, func() Record { return new(SessionExit) }),
		n("session-terminal-message-output", &termMsgOut, func() Record { return new(SessionTerminalMessage) }),
		n("session-terminal-message-exit", &termMsgExit, func() Record { return new(SessionTerminalMessage) }),
		n("non-interactive-session-request", &execute, func() Record { return new(NonInteractiveSessionRequest) }),
		n("non-interactive-output", &niOut, func() Record { return new(NonInteractiveOutput) }),
		n("non-interactive-session-message-stdout", &NonInteractiveSessionMessage{Kind: NonInteractiveStdout, Output: &niOut}, func() Record { return new(NonInteractiveSessionMessage) }),
		n("non-interactive-session-message-stderr", &NonInteractiveSessionMessage{Kind: NonInteractiveStderr, Output: &niOut}, func() Record { return new(NonInteractiveSessionMessage) }),
		n("non-interactive-session-message-exit", &NonInteractiveSessionMessage{Kind: NonInteractiveExit, Exit: &lost}, func() Record { return new(NonInteractiveSessionMessage) }),
		n("interactive-session-request", &interactive, func() Record { return new(InteractiveSessionRequest) }),
		n("interactive-session-event-terminal", &InteractiveSessionEvent{Kind: InteractiveTerminal, Terminal: &SessionTerminalEvent{Kind: EventResize, Resize: &resize}}, func() Record { return new(InteractiveSessionEvent) }),
		n("interactive-session-event-prompt-decision", &InteractiveSessionEvent{Kind: InteractivePromptDecision, Decision: &signedDecision}, func() Record { return new(InteractiveSessionEvent) }),
		n("interactive-session-event-poll", &InteractiveSessionEvent{Kind: InteractivePoll}, func() Record { return new(InteractiveSessionEvent) }),
		n("terminal-prompt", &prompt, func() Record { return new(TerminalPrompt) }),
		n("interactive-session-message-terminal", &InteractiveSessionMessage{Kind: InteractiveMessageTerminal, Terminal: &termMsgOut}, func() Record { return new(InteractiveSessionMessage) }),
		n("interactive-session-message-prompt", &InteractiveSessionMessage{Kind: InteractiveMessagePrompt, Prompt: &prompt}, func() Record { return new(InteractiveSessionMessage) }),
		n("interactive-session-batch", &InteractiveSessionBatch{SessionID: sid, Messages: []InteractiveSessionMessage{
			{Kind: InteractiveMessageTerminal, Terminal: &termMsgOut},
			{Kind: InteractiveMessagePrompt, Prompt: &prompt},
			{Kind: InteractiveMessageTerminal, Terminal: &termMsgExit},
		}}, func() Record { return new(InteractiveSessionBatch) }),
		n("interactive-session-batch-empty", &InteractiveSessionBatch{SessionID: sid}, func() Record { return new(InteractiveSessionBatch) }),
	}
}

func goldenPath(name string) string { return filepath.Join("testdata", "records", name+".hex") }

// checkGolden compares got with the hex golden file, or rewrites it with
// -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	text := wrapHex(got)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file: %v (run go test -update to create it)", err)
	}
	wantBytes, err := hex.DecodeString(strings.Join(strings.Fields(string(want)), ""))
	if err != nil {
		t.Fatalf("golden file %s: %v", path, err)
	}
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("encoding differs from %s:\n got %x\nwant %x", path, got, wantBytes)
	}
}

func wrapHex(b []byte) string {
	h := hex.EncodeToString(b)
	var sb strings.Builder
	for len(h) > 64 {
		sb.WriteString(h[:64])
		sb.WriteByte('\n')
		h = h[64:]
	}
	sb.WriteString(h)
	sb.WriteByte('\n')
	return sb.String()
}

func TestRecordsGoldenAndRoundTrip(t *testing.T) {
	for _, nr := range allRecords(t) {
		t.Run(nr.name, func(t *testing.T) {
			b, err := Encode(nr.rec)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			checkGolden(t, goldenPath(nr.name), b)
			back := nr.fresh()
			if err := Decode(b, back); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(back, nr.rec) {
				t.Fatalf("round trip differs:\n got %+v\nwant %+v", back, nr.rec)
			}
			again, err := Encode(back)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs: %v", err)
			}
			// No proper prefix decodes, and no extra byte is accepted.
			for i := 0; i < len(b); i++ {
				if err := Decode(b[:i], nr.fresh()); err == nil {
					t.Fatalf("prefix of %d of %d bytes decodes", i, len(b))
				}
			}
			if err := Decode(append(bytes.Clone(b), 0), nr.fresh()); !errors.Is(err, postcard.ErrTrailing) {
				t.Fatalf("trailing byte: %v", err)
			}
		})
	}
}

// Hand-checked encodings against the Postcard rules: a 16-byte ID is raw,
// u16 sizes are varints (200 = c8 01, 1600 = c0 0c), Option<u8> is a tag
// then the byte, enums are a varint index.
func TestHandCheckedEncodings(t *testing.T) {
	sid := ids.SessionID(filled16(0x81))
	idHex := "8182838485868788898a8b8c8d8e8f90"
	tests := []struct {
		name string
		rec  Record
		hex  string
	}{
		{"terminal-resize", &TerminalResize{SessionID: sid, Rows: 50, Columns: 200, PixelWidth: 1600}, idHex + "32" + "c801" + "c00c" + "00"},
		{"session-exit exited 3", &SessionExit{SessionID: sid, Outcome: ExitExited, ExitCode: u8p(3)}, idHex + "00" + "0103"},
		{"session-exit terminated", &SessionExit{SessionID: sid, Outcome: ExitTerminated}, idHex + "01" + "00"},
		{"terminal-signal quit", &TerminalSignal{SessionID: sid, Signal: SignalQuit}, idHex + "01"},
		{"session-terminal-event close", &SessionTerminalEvent{Kind: EventClose, Close: &SessionClose{SessionID: sid}}, "03" + idHex},
		{"poll", &InteractiveSessionEvent{Kind: InteractivePoll}, "02"},
		{"non-interactive request", &NonInteractiveSessionRequest{SessionID: sid, Argv: []string{"ls", "-l"}}, "01" + idHex + "02" + "026c73" + "022d6c"},
		{"signed record", &SignedProtocolRecord{Kind: RecordMailboxResultChunk, PayloadBytes: []byte{0xaa}, Signature: Signature{0: 1, 63: 2}},
			"05" + "01aa" + "01" + strings.Repeat("00", 62) + "02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(b); got != tt.hex {
				t.Fatalf("encoding\n got %s\nwant %s", got, tt.hex)
			}
		})
	}
}
