package protocol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

func TestPrivateKeyRedacted(t *testing.T) {
	f := newFixture(t)
	bundle, err := NewSandboxCredentialBundle(issuerKey, f.manifest, f.coordinator, sandboxKey)
	if err != nil {
		t.Fatal(err)
	}
	seed := sandboxKey.seed()
	secret := hex.EncodeToString(seed[:])
	holder := struct {
		key   PrivateKey
		inner PrivateKey
	}{sandboxKey, sandboxKey}
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		outputs = append(outputs,
			fmt.Sprintf(verb, sandboxKey), fmt.Sprintf(verb, &sandboxKey),
			fmt.Sprintf(verb, bundle), fmt.Sprintf(verb, &bundle), fmt.Sprintf(verb, holder))
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("bundle", "key", sandboxKey, "bundle", bundle)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("bundle", "key", sandboxKey, "bundle", bundle)
	outputs = append(outputs, logs.String())
	for _, out := range outputs {
		hexOut := strings.ToLower(out)
		if strings.Contains(hexOut, secret) || strings.Contains(out, string(seed[:])) ||
			strings.Contains(hexOut, hex.EncodeToString(seed[:8])) {
			t.Fatalf("private key leaked: %s", out)
		}
	}
	if !strings.Contains(fmt.Sprint(sandboxKey), sandboxKey.Public().String()) {
		t.Fatal("String does not name the public key")
	}
}

func TestValidationRules(t *testing.T) {
	f := newFixture(t)
	sid := f.binding.SessionID
	long := strings.Repeat("a", MaxArgvBytes)
	tests := []struct {
		name  string
		rec   Record
		field string
	}{
		{"empty argv", &MailboxRequest{SessionBinding: f.binding, RequestID: f.request.RequestID, SessionCapability: f.capability, SandboxCredentialID: f.sandbox.CredentialID}, "command_argv"},
		{"relative argv[0]", func() Record { r := f.request; r.CommandArgv = []string{"git", "push"}; return &r }(), "command_argv"},
		{"NUL in argv", func() Record { r := f.request; r.CommandArgv = []string{"/bin/echo", "a\x00b"}; return &r }(), "command_argv"},
		{"invalid UTF-8 argv", func() Record { r := f.request; r.CommandArgv = []string{"/bin/echo", "\xff"}; return &r }(), "command_argv"},
		{"argv too long", func() Record { r := f.request; r.CommandArgv = []string{"/bin/echo", long}; return &r }(), "command_argv"},
		{"too many argv elements", func() Record {
			r := f.request
			r.CommandArgv = append([]string{"/bin/echo"}, make([]string, MaxArgvElements)...)
			return &r
		}(), "command_argv"},
		{"justification too long", func() Record {
			r := f.request
			r.Justification = strings.Repeat("j", MaxJustificationBytes+1)
			return &r
		}(), "justification"},
		{"zero request ID", func() Record { r := f.request; r.RequestID = ids.RequestID{}; return &r }(), "request_id"},
		{"bad profile", func() Record { r := f.request; r.SessionBinding.GenerationIdentity.AgentProfile = ".."; return &r }(), "session_binding.generation_identity.agent_profile"},
		{"exit code for Terminated", &SessionExit{SessionID: sid, Outcome: ExitTerminated, ExitCode: u8p(1)}, "exit_code"},
		{"no exit code for Exited", &SessionExit{SessionID: sid, Outcome: ExitExited}, "exit_code"},
		{"unknown exit outcome", &SessionExit{SessionID: sid, Outcome: 7}, "exit_code"},
		{"exit code for Denied", func() Record { r := f.result(); r.Outcome = OutcomeDenied; return &r }(), "exit_code"},
		{"deny with argv", func() Record { d := f.decision(); d.Decision = DecisionDeny; return &d }(), "approved_command_argv"},
		{"approve without argv", func() Record { d := f.decision(); d.ApprovedCommandArgv = nil; return &d }(), "approved_command_argv"},
		{"empty chunk", func() Record { c := f.chunk(0, StreamStdout, nil); return &c }(), "bytes"},
		{"oversized chunk", func() Record { c := f.chunk(0, StreamStdout, make([]byte, MaxChunkBytes+1)); return &c }(), "bytes"},
		{"unknown stream", func() Record { c := f.chunk(0, 2, []byte("x")); return &c }(), "stream"},
		{"union kind without payload", &SessionTerminalEvent{Kind: EventInput}, "variant"},
		{"union with two payloads", &SessionTerminalEvent{Kind: EventClose, Close: &SessionClose{SessionID: sid}, Input: &TerminalInput{SessionID: sid, Bytes: []byte("x")}}, "variant"},
		{"unknown union kind", &ControlRequest{Kind: 9}, "variant"},
		{"poll with payload", &InteractiveSessionEvent{Kind: InteractivePoll, Terminal: &SessionTerminalEvent{}}, "variant"},
		{"prompt decision of another kind", &InteractiveSessionEvent{Kind: InteractivePromptDecision, Decision: &f.signedReq}, "decision"},
		{"batch with foreign message", &InteractiveSessionBatch{SessionID: sid, Messages: []InteractiveSessionMessage{{Kind: InteractiveMessageTerminal, Terminal: &SessionTerminalMessage{Kind: MessageOutput, Output: &TerminalOutput{SessionID: ids.SessionID(filled16(1)), Bytes: []byte("x")}}}}}, "messages[0]"},
		{"initial size of another session", &InteractiveSessionRequest{SessionID: sid, Argv: []string{"sh"}, InitialSize: TerminalResize{SessionID: ids.SessionID(filled16(1))}}, "initial_size"},
		{"empty terminal input", &TerminalInput{SessionID: sid}, "bytes"},
		{"enrollment response with server role", &ClientEnrollmentResponse{Credential: fakeTLSCredential(f.gen, TLSRoleSessionCoordinator, ids.ID(f.gen.CoordinatorID))}, "credential.role"},
		{"coordinator equals sandbox", func() Record { g := f.gen; g.SandboxID = ids.SandboxID(g.CoordinatorID); return &g }(), "sandbox_id"},
		{"signed record without payload", &SignedProtocolRecord{Kind: RecordMailboxResult}, "payload_bytes"},
		{"signed record of unknown kind", &SignedProtocolRecord{Kind: 6, PayloadBytes: []byte{1}}, "variant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rec.Validate()
			var pe *Error
			if !errors.As(err, &pe) || pe.Kind != KindMalformed || pe.Field != tt.field {
				t.Fatalf("Validate = %v, want a malformed-record error for field %s", err, tt.field)
			}
			if _, err := Encode(tt.rec); err == nil {
				t.Fatal("Encode accepted the invalid record")
			}
			// The decoder refuses the same bytes the encoder would write,
			// unless the fault is a payload the wire form does not carry.
			if tt.field == "variant" && (strings.HasPrefix(tt.name, "union with") || strings.HasPrefix(tt.name, "poll with")) {
				return
			}
			b := postcard.Marshal(tt.rec)
			fresh := freshLike(tt.rec)
			if err := Decode(b, fresh); err == nil {
				t.Fatalf("Decode accepted % x", b)
			}
		})
	}
}

// freshLike returns a new zero record of r's type.
func freshLike(r Record) Record {
	switch r.(type) {
	case *MailboxRequest:
		return new(MailboxRequest)
	case *SessionExit:
		return new(SessionExit)
	case *MailboxResult:
		return new(MailboxResult)
	case *DeveloperDecision:
		return new(DeveloperDecision)
	case *MailboxResultChunk:
		return new(MailboxResultChunk)
	case *SessionTerminalEvent:
		return new(SessionTerminalEvent)
	case *ControlRequest:
		return new(ControlRequest)
	case *InteractiveSessionEvent:
		return new(InteractiveSessionEvent)
	case *InteractiveSessionBatch:
		return new(InteractiveSessionBatch)
	case *InteractiveSessionRequest:
		return new(InteractiveSessionRequest)
	case *TerminalInput:
		return new(TerminalInput)
	case *ClientEnrollmentResponse:
		return new(ClientEnrollmentResponse)
	case *GenerationIdentity:
		return new(GenerationIdentity)
	case *SignedProtocolRecord:
		return new(SignedProtocolRecord)
	}
	panic(fmt.Sprintf("freshLike: %T", r))
}

func TestDecodeRejectsWrongVersion(t *testing.T) {
	f := newFixture(t)
	b, err := Encode(&f.request)
	if err != nil {
		t.Fatal(err)
	}
	b[0] = 2
	err = Decode(b, new(MailboxRequest))
	var de *postcard.DecodeError
	if !errors.As(err, &de) || de.Field != "protocol_version" || !errors.Is(err, postcard.ErrInvalidValue) {
		t.Fatalf("version 2: %v", err)
	}
}

func TestLargestRecordsFit(t *testing.T) {
	f := newFixture(t)
	r := f.request
	r.CommandArgv = make([]string, MaxArgvElements)
	r.CommandArgv[0] = "/" + strings.Repeat("x", MaxArgvBytes-MaxArgvElements)
	for i := 1; i < MaxArgvElements; i++ {
		r.CommandArgv[i] = "y"
	}
	r.Justification = strings.Repeat("j", MaxJustificationBytes)
	if _, err := Sign(sandboxKey, &r); err != nil {
		t.Fatalf("largest request: %v", err)
	}
	chunk := f.chunk(0, StreamStdout, make([]byte, MaxChunkBytes))
	if _, err := Sign(coordinatorKey, &chunk); err != nil {
		t.Fatalf("largest chunk: %v", err)
	}
}

func TestKindString(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		want string
	}{
		{KindMalformed, "malformed record"},
		{KindTrustManifest, "trust manifest mismatch"},
		{0, "protocol error kind 0"},
		{-1, "protocol error kind -1"},
		{KindTrustManifest + 1, fmt.Sprintf("protocol error kind %d", int(KindTrustManifest+1))},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(tc.k), got, tc.want)
		}
	}
}
