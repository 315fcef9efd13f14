package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/audit"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
)

// logRecords is one auto-approved request and one that the developer
// denied, whose argv carries an escape sequence.
func logRecords() []audit.Record {
	gen := ids.GenerationID{0x01}
	session := ids.SessionID{0x02}
	first := ids.RequestID{0x3f, 0x2a, 0x9c, 0x01, 15: 0x01}
	second := ids.RequestID{0xa0, 0x00, 0x00, 0x07, 15: 0x02}
	at := time.Date(2026, 12, 2, 15, 4, 5, 123456789, time.UTC)
	zero := uint8(0)
	git := []string{"/usr/bin/git", "status"}
	echo := []string{"/usr/bin/echo", "\x1b[2Jhi"}
	return []audit.Record{
		{Time: at, Generation: gen, Session: session, Request: first, Phase: escalation.PhaseVerified,
			SessionPhase: escalation.SessionAttached, Rule: -1, Argv: git},
		{Time: at, Generation: gen, Session: session, Request: first, Phase: escalation.PhaseApproved,
			SessionPhase: escalation.SessionAttached, Source: escalation.SourceAutoRule, Rule: 0, Argv: git},
		{Time: at.Add(time.Second), Generation: gen, Session: session, Request: first, Phase: escalation.PhaseCompleted,
			SessionPhase: escalation.SessionAttached, Source: escalation.SourceAutoRule, Rule: 0, Argv: git,
			Outcome: audit.OutcomeCompleted, ExitCode: &zero},
		{Time: at.Add(2 * time.Second), Generation: gen, Session: session, Request: second, Phase: escalation.PhaseAwaitingApproval,
			SessionPhase: escalation.SessionAttached, Rule: -1, Argv: echo, Reason: escalation.ErrNoRule.Error()},
		{Time: at.Add(3 * time.Second), Generation: gen, Session: session, Request: second, Phase: escalation.PhaseDenied,
			SessionPhase: escalation.SessionAttached, Source: escalation.SourceDeveloper, Rule: -1, Argv: echo,
			Outcome: audit.OutcomeDenied},
	}
}

const logText = `2026-12-02T15:04:05Z  request 3f2a9c01  Verified  "/usr/bin/git" "status"
2026-12-02T15:04:05Z  request 3f2a9c01  Approved  AutoRule rule 0  "/usr/bin/git" "status"
2026-12-02T15:04:06Z  request 3f2a9c01  Completed  AutoRule rule 0  exit 0  "/usr/bin/git" "status"
2026-12-02T15:04:07Z  request a0000007  AwaitingApproval  "/usr/bin/echo" "\x1b[2Jhi"  reason "no auto-approval rule matches the exact command"
2026-12-02T15:04:08Z  request a0000007  Denied  Developer  "/usr/bin/echo" "\x1b[2Jhi"
`

// writeAudit writes recs to the audit log of id under root and returns
// the file's path.
func writeAudit(t *testing.T, root string, id ids.DomainID, recs []audit.Record) string {
	t.Helper()
	path := audit.Path(root, id)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, r := range recs {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestLogCommand(t *testing.T) {
	h := stopHost(t)
	domain := config.DomainIDV1("dev", h.ws)
	defaultRoot := filepath.Join(h.dir, "data", "lazaret")
	otherRoot := filepath.Join(h.dir, "elsewhere")
	dev := []string{"--profile", "dev", "--workspace", h.ws}
	byDomain := []string{"--domain", domain.String(), "--storage-root", defaultRoot}
	what := `the Domain of profile "dev" in ` + h.ws
	two := twoProfiles(t, h)

	// Before any log exists.
	missing := audit.Path(defaultRoot, domain)
	noLog := []struct {
		name           string
		args           []string
		stdout, stderr string
	}{
		{"profile", dev, "no audit log for " + what + " yet (" + missing + ")\n", ""},
		{"profile, JSON", append([]string{"--json"}, dev...), "[]\n", "no audit log for " + what + " yet (" + missing + ")\n"},
		{"domain", byDomain, "no audit log for Domain " + domain.String() + " yet (" + missing + ")\n", ""},
	}
	for _, tt := range noLog {
		t.Run("no log/"+tt.name, func(t *testing.T) {
			stdout, stderr, err := runApp(t, append([]string{"log"}, tt.args...)...)
			if exitCode(err) != 0 || stdout != tt.stdout || stderr != tt.stderr {
				t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %q\nwant   %q", exitCode(err), stdout, tt.stdout, stderr, tt.stderr)
			}
		})
	}

	empty := writeAudit(t, otherRoot, domain, nil)
	t.Run("empty log", func(t *testing.T) {
		stdout, stderr, err := runApp(t, append([]string{"log", "--storage-root", otherRoot}, dev...)...)
		want := "no escalation requests recorded for " + what + " yet (" + empty + ")\n"
		if exitCode(err) != 0 || stdout != want || stderr != "" {
			t.Errorf("exit %d stdout %q stderr %q, want %q", exitCode(err), stdout, stderr, want)
		}
	})

	recs := logRecords()
	writeAudit(t, defaultRoot, domain, recs)
	written, err := audit.Read(audit.Path(defaultRoot, domain))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{dev, byDomain} {
		t.Run("text/"+args[0], func(t *testing.T) {
			stdout, stderr, err := runApp(t, append([]string{"log"}, args...)...)
			if exitCode(err) != 0 || stderr != "" {
				t.Fatalf("exit %d (%v), stderr %q", exitCode(err), err, stderr)
			}
			if stdout != logText {
				t.Errorf("stdout\n%s\nwant\n%s", stdout, logText)
			}
		})
		t.Run("json/"+args[0], func(t *testing.T) {
			stdout, stderr, err := runApp(t, append([]string{"log", "--json"}, args...)...)
			if exitCode(err) != 0 || stderr != "" {
				t.Fatalf("exit %d (%v), stderr %q", exitCode(err), err, stderr)
			}
			var got []audit.Record
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("output is not a JSON array of records: %v\n%s", err, stdout)
			}
			if !reflect.DeepEqual(got, written) {
				t.Errorf("JSON records\n got %+v\nwant %+v", got, written)
			}
			if !strings.Contains(stdout, `"prev": "0000000000000000000000000000000000000000000000000000000000000000"`) {
				t.Errorf("JSON lacks the first record's prev:\n%s", stdout)
			}
		})
	}

	bad := []struct {
		name, stderr string
		args         []string
	}{
		{"several profiles", "--profile is required: the configuration " + two + " defines claude, dev", []string{"--config", two}},
		{"domain and profile", "give it without --profile", append([]string{"--domain", domain.String()}, dev...)},
		{"bad domain", "--domain (a 64-digit hexadecimal Domain ID)", []string{"--domain", "abc"}},
		{"argument", `log takes no arguments, got "x"`, append(append([]string{}, dev...), "x")},
		{"unknown profile", "nope", []string{"--profile", "nope", "--workspace", h.ws}},
	}
	for _, tt := range bad {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			stdout, stderr, err := runApp(t, append([]string{"log"}, tt.args...)...)
			if exitCode(err) != session.ExitFailure || stdout != "" || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d stdout %q stderr %q, want exit %d and %q", exitCode(err), stdout, stderr, session.ExitFailure, tt.stderr)
			}
		})
	}
}

func TestLogCommandBrokenChain(t *testing.T) {
	h := stopHost(t)
	domain := config.DomainIDV1("dev", h.ws)
	root := filepath.Join(h.dir, "data", "lazaret")
	path := writeAudit(t, root, domain, logRecords())
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(orig), "\n")
	textLines := strings.SplitAfter(logText, "\n")
	tests := []struct {
		name   string
		data   string
		shown  int // records printed before the error
		line   int
		stderr string
	}{
		{"edited line", strings.Replace(string(orig), `"status"`, `"stat0s"`, 1), 1, 2, "audit chain broken"},
		{"deleted line", lines[0] + lines[1] + lines[3] + lines[4], 2, 3, "audit chain broken"},
		{"cut last line", string(orig[:len(orig)-10]), 4, 5, "unterminated line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, err := runApp(t, "log", "--profile", "dev", "--workspace", h.ws)
			if exitCode(err) != exitLogBroken {
				t.Fatalf("exit %d (%v), want %d", exitCode(err), err, exitLogBroken)
			}
			want := strings.Join(textLines[:tt.shown], "")
			if tt.name == "edited line" {
				// The edited first line is printed as read: only the
				// second line's prev shows that it changed.
				want = strings.Replace(want, `"status"`, `"stat0s"`, 1)
			}
			if stdout != want {
				t.Errorf("stdout\n%s\nwant\n%s", stdout, want)
			}
			for _, s := range []string{path, fmt.Sprintf("line %d:", tt.line), tt.stderr} {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q lacks %q", stderr, s)
				}
			}
			stdout, _, err = runApp(t, "log", "--json", "--profile", "dev", "--workspace", h.ws)
			if exitCode(err) != exitLogBroken {
				t.Fatalf("--json: exit %d, want %d", exitCode(err), exitLogBroken)
			}
			var got []audit.Record
			if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != tt.shown {
				t.Errorf("--json printed %d records (%v), want %d", len(got), err, tt.shown)
			}
		})
	}
}

func TestWriteLogText(t *testing.T) {
	var b bytes.Buffer
	if err := writeLogText(&b, logRecords()); err != nil {
		t.Fatal(err)
	}
	if b.String() != logText {
		t.Errorf("got\n%s\nwant\n%s", b.String(), logText)
	}
	if strings.ContainsRune(b.String(), 0x1b) {
		t.Error("an escape character reached the output")
	}
}
