//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// A terminal answers queries that a program prints with bytes on the
// program's input, as if typed. These tests print such queries from inside
// the sandbox while an escalation request waits at the prompt, with a
// terminal that answers as xterm, VTE or tmux do, and check that no answer
// decides the request.

// query is one terminal query and the reply a terminal writes for it.
type query struct {
	name  string
	bytes string
}

// personality maps each query a terminal answers to its reply; a query
// it does not answer is absent. The replies are the terminals' own bytes
// (docs/ESCALATION.md, "Terminal replies").
type personality struct {
	name    string
	replies map[string]string
}

const (
	qDA1      = "\x1b[c"
	qDA2      = "\x1b[>c"
	qDECRQM   = "\x1b[?2004$p"
	qCPR      = "\x1b[6n"
	qDSR      = "\x1b[5n"
	qOSC10    = "\x1b]10;?\x07"
	qOSC11    = "\x1b]11;?\x1b\\"
	qXTVER    = "\x1b[>q"
	qDECRQSS  = "\x1bP$qm\x1b\\"
	qKittyKbd = "\x1b[?u"
)

var (
	xterm = personality{"xterm", map[string]string{
		qDA1:     "\x1b[?64;1;2;6;9;15;16;17;18;21;22;28c",
		qDA2:     "\x1b[>41;379;0c",
		qDECRQM:  "\x1b[?2004;2$y",
		qCPR:     "\x1b[40;1R",
		qDSR:     "\x1b[0n",
		qOSC10:   "\x1b]10;rgb:0000/0000/0000\x07",
		qOSC11:   "\x1b]11;rgb:ffff/ffff/ffff\x1b\\",
		qXTVER:   "\x1bP>|XTerm(379)\x1b\\",
		qDECRQSS: "\x1bP1$r0m\x1b\\",
	}}
	vte = personality{"vte", map[string]string{
		qDA1:    "\x1b[?65;1;9c",
		qDA2:    "\x1b[>65;7600;1c",
		qDECRQM: "\x1b[?2004;2$y",
		qCPR:    "\x1b[40;1R",
		qDSR:    "\x1b[0n",
		qOSC10:  "\x1b]10;rgb:ffff/ffff/ffff\x07",
		qOSC11:  "\x1b]11;rgb:1717/1717/1717\x1b\\",
	}}
	tmuxReplies = personality{"tmux", map[string]string{
		qDA1:   "\x1b[?1;2c",
		qDA2:   "\x1b[>84;0;0c",
		qCPR:   "\x1b[40;1R",
		qDSR:   "\x1b[0n",
		qXTVER: "\x1bP>|tmux 3.3a\x1b\\",
	}}
)

var allQueries = []string{qDA1, qDA2, qDECRQM, qCPR, qDSR, qOSC10, qOSC11, qXTVER, qDECRQSS, qKittyKbd}

// ptyTerminal runs lazaret-cli start on a pseudo-terminal whose other end
// is a small terminal emulator: it records the output and answers the
// queries in it as its personality does, each reply delayed by latency
// (a terminal across a network link).
type ptyTerminal struct {
	s       *sandbox
	f       *os.File
	cmd     *exec.Cmd
	latency time.Duration

	mu      sync.Mutex
	out     []byte
	scanned int
	answer  personality
	replied map[string]int
	replies chan timedReply
	// lastReply is when the latest reply was written.
	lastReply time.Time
	// unwritten counts the replies queued and not yet written.
	unwritten int
}

type timedReply struct {
	at    time.Time
	bytes string
}

func (s *sandbox) ptyTerminal(answer personality, latency time.Duration) *ptyTerminal {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(binDir(s.t), "lazaret-cli"), "start", "--profile", "dev",
		"--workspace", s.workspace, "--config", s.config, "--linger", "2s")
	cmd.Env = append(os.Environ(), append(s.env, "TERM=xterm-256color")...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		s.t.Fatalf("starting lazaret-cli on a pseudo-terminal: %v", err)
	}
	pt := &ptyTerminal{s: s, f: f, cmd: cmd, latency: latency, answer: answer,
		replied: map[string]int{}, replies: make(chan timedReply, 1<<16)}
	go pt.read()
	go pt.write()
	s.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
	})
	return pt
}

func (pt *ptyTerminal) read() {
	buf := make([]byte, 4096)
	for {
		n, err := pt.f.Read(buf)
		if n > 0 {
			pt.mu.Lock()
			pt.out = append(pt.out, buf[:n]...)
			pt.scan(time.Now())
			pt.mu.Unlock()
		}
		if err != nil {
			close(pt.replies)
			return
		}
	}
}

// scan answers the complete queries after pt.scanned; a query cut by the
// end of the output so far waits for the next read.
func (pt *ptyTerminal) scan(now time.Time) {
	for pt.scanned < len(pt.out) {
		i := bytes.IndexByte(pt.out[pt.scanned:], 0x1b)
		if i < 0 {
			pt.scanned = len(pt.out)
			return
		}
		rest := pt.out[pt.scanned+i:]
		matched, partial := "", false
		for _, q := range allQueries {
			if bytes.HasPrefix(rest, []byte(q)) {
				matched = q
				break
			}
			if len(rest) < len(q) && strings.HasPrefix(q, string(rest)) {
				partial = true
			}
		}
		if matched == "" && partial {
			pt.scanned += i
			return
		}
		if matched == "" {
			pt.scanned += i + 1
			continue
		}
		pt.scanned += i + len(matched)
		if r, ok := pt.answer.replies[matched]; ok {
			pt.replied[matched]++
			select {
			case pt.replies <- timedReply{at: now.Add(pt.latency), bytes: r}:
				pt.unwritten++
			default: // a terminal drops what it cannot keep up with, too
			}
		}
	}
}

func (pt *ptyTerminal) write() {
	for r := range pt.replies {
		time.Sleep(time.Until(r.at))
		pt.mu.Lock()
		_, _ = pt.f.WriteString(r.bytes)
		pt.lastReply = time.Now()
		pt.unwritten--
		pt.mu.Unlock()
	}
}

// setPersonality changes whom the emulator answers as.
func (pt *ptyTerminal) setPersonality(p personality) {
	pt.mu.Lock()
	pt.answer = p
	pt.replied = map[string]int{}
	pt.mu.Unlock()
}

// waitQuiet waits until no reply is queued and none was written for
// quiet, and fails the test when that takes longer than limit.
func (pt *ptyTerminal) waitQuiet(t *testing.T, quiet, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		pt.mu.Lock()
		last, queued := pt.lastReply, pt.unwritten
		pt.mu.Unlock()
		if queued == 0 && time.Since(last) >= quiet {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the emulator still answered queries %v after the flood should have ended (last reply %v ago, %d queued)", limit, time.Since(last), queued)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resetLine clears the shell's line with Ctrl-C and checks that the shell
// runs a typed command again, for the next round. Terminal replies that
// reached the line editor during a flood can still spoil the first line
// after it (on loaded CI hosts the first command failed with "syntax
// error: unexpected ;", the shape of a reply's parameters, without echoing
// what was typed), so it tries up to five times; a shell that never runs a
// command again fails the test.
func (pt *ptyTerminal) resetLine(t *testing.T) {
	t.Helper()
	for try := 1; ; try++ {
		// Ctrl-C, then the new prompt, which busybox follows with a
		// cursor position query; its reply is answered and read before
		// anything is typed.
		c := pt.mark()
		pt.typeKeys("\x03")
		pt.shows(c, "# ", 10*time.Second)
		pt.waitQuiet(t, time.Second, 30*time.Second)
		m := pt.mark()
		pt.typeKeys("echo clean-$((6*7))\r")
		if pt.shows(m, "clean-42", 10*time.Second) {
			return
		}
		if try == 5 {
			t.Fatalf("the shell ran no typed command after %d tries; output since the last:\n%q", try, tail(pt.since(m), 4000))
		}
		t.Logf("try %d: the typed command did not run; output since it:\n%q", try, tail(pt.since(m), 2000))
	}
}

// repliedCount is how many queries were answered since setPersonality.
func (pt *ptyTerminal) repliedCount() int {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	n := 0
	for _, c := range pt.replied {
		n += c
	}
	return n
}

// typeKeys writes keys as the developer types them, one write each.
func (pt *ptyTerminal) typeKeys(keys ...string) {
	for _, k := range keys {
		pt.mu.Lock()
		_, err := pt.f.WriteString(k)
		pt.mu.Unlock()
		if err != nil {
			pt.s.t.Fatalf("typing %q: %v", k, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mark is the length of the output so far, for waits on what follows it.
func (pt *ptyTerminal) mark() int {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return len(pt.out)
}

func (pt *ptyTerminal) since(mark int) string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return string(pt.out[mark:])
}

// waitOutput waits until the output after mark contains want.
func (pt *ptyTerminal) waitOutput(mark int, want string, timeout time.Duration) {
	pt.s.t.Helper()
	if !pt.shows(mark, want, timeout) {
		pt.s.t.Fatalf("the terminal never showed %q; output since the mark:\n%q", want, tail(pt.since(mark), 4000))
	}
}

// shows reports whether the output since mark shows want within timeout.
func (pt *ptyTerminal) shows(mark int, want string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(pt.since(mark), want) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// developerAnswers lists the audit log's developer answers (phase and
// outcome) on requests whose argv contains marker.
func (s *sandbox) developerAnswers(marker string) []string {
	s.t.Helper()
	out, errOut, code := s.cli("log", "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--json")
	if code != 0 {
		s.t.Fatalf("log --json: code %d: %s", code, errOut)
	}
	var records []struct {
		Phase   string   `json:"phase"`
		Source  string   `json:"source"`
		Argv    []string `json:"argv"`
		Outcome string   `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &records); err != nil {
		s.t.Fatalf("log --json printed %q: %v", out, err)
	}
	var answers []string
	for _, r := range records {
		// The request's move to the prompt is recorded with the
		// developer as source, too; it is not an answer.
		if r.Source == "Developer" && r.Phase != "AwaitingApproval" && strings.Contains(strings.Join(r.Argv, " "), marker) {
			answers = append(answers, r.Phase+" "+r.Outcome)
		}
	}
	return answers
}

// floodEnded is what a flood prints when its loop is over; the command
// types it as an expression, so that the echo of the typed line does not
// show it.
const floodEnded = "flood-ended-42"

// flood is a shell command that prints the queries q in a loop for
// seconds in the background, then floodEnded. It stays shorter than the
// sandbox shell's line editor takes (busybox: 1024 bytes).
func flood(seconds int, q ...string) string {
	var b strings.Builder
	for i := 0; i < max(1, 8/len(q)); i++ {
		for _, x := range q {
			for _, c := range []byte(x) {
				fmt.Fprintf(&b, "\\%03o", c)
			}
		}
	}
	return fmt.Sprintf("(end=$(($(date +%%s)+%d)); while [ $(date +%%s) -lt $end ]; do printf '%s'; sleep 0.01; done; echo flood-ended-$((20+22))) & ", seconds, b.String())
}

const promptShown = "host escalation request"

// assertPending checks, for hold, that the request whose argv contains
// marker has no developer answer in the audit log and that its guest
// command has not returned.
func assertPending(t *testing.T, s *sandbox, output func() string, marker string, hold time.Duration) {
	t.Helper()
	time.Sleep(hold)
	if got := s.developerAnswers(marker); len(got) != 0 {
		t.Errorf("terminal replies decided the request %s: audit log %q", marker, got)
	}
	ended := regexp.MustCompile(`rc-` + marker + `=[0-9]`)
	if out := output(); ended.MatchString(out) || strings.Contains(out, "lazaret: approved") || strings.Contains(out, "lazaret: denied") {
		t.Errorf("the request %s was decided without a key; output:\n%q", marker, tail(out, 4000))
	}
}

// TestEscalationPromptIgnoresDECRQMReply is the attack of a sandbox that
// prints DECRQM (CSI ? 2004 $ p) while its request waits: xterm answers
// CSI ? 2004 ; 2 $ y, and that y must not approve.
func TestEscalationPromptIgnoresDECRQMReply(t *testing.T) {
	s := escalationSandbox(t)
	pt := s.ptyTerminal(xterm, 30*time.Millisecond)
	m := pt.mark()
	pt.typeKeys("echo ready-$((6*7))\r")
	pt.waitOutput(m, "ready-42", 90*time.Second)

	m = pt.mark()
	pt.typeKeys(flood(8, qDECRQM) + guestRun + " -- /usr/bin/echo decrqm-attack; echo rc-decrqm-attack=$?\r")
	pt.waitOutput(m, promptShown, 60*time.Second)
	assertPending(t, s, func() string { return pt.since(m) }, "decrqm-attack", 3*time.Second)
	if pt.repliedCount() == 0 {
		t.Fatal("the emulator answered no DECRQM query: the attack did not run")
	}
	// A real key still decides it.
	time.Sleep(6 * time.Second)
	pt.typeKeys("n", "\r")
	pt.waitOutput(m, "rc-decrqm-attack=125", 60*time.Second)
	if got := s.developerAnswers("decrqm-attack"); len(got) == 0 || !strings.HasPrefix(got[0], "Denied") && !strings.HasPrefix(got[0], "DenialPending") {
		t.Errorf("the typed denial: audit log %q", got)
	}
}

// TestEscalationPromptIgnoresTmuxDSRReply is the attack under tmux: the
// sandbox prints DSR (CSI 5 n), tmux answers CSI 0 n, and that n must not
// deny.
func TestEscalationPromptIgnoresTmuxDSRReply(t *testing.T) {
	s := escalationSandbox(t)
	a := s.terminal("a")
	a.ready()
	a.send(flood(8, qDSR)+guestRun+" -- /usr/bin/echo dsr-attack; echo rc-dsr-attack=$?", "Enter")
	a.waitScreen(promptShown, 60*time.Second)
	assertPending(t, s, a.screen, "dsr-attack", 3*time.Second)
	time.Sleep(6 * time.Second)
	a.send("y")
	a.send("Enter")
	a.waitScreen("rc-dsr-attack=0", 60*time.Second)
	if got := s.developerAnswers("dsr-attack"); len(got) == 0 || !strings.HasPrefix(got[0], "Approved") {
		t.Errorf("the typed approval: audit log %q", got)
	}
}

// TestEscalationPromptFloodedWithQueries floods every query from inside
// the sandbox while a request waits, with a terminal that answers as
// xterm, VTE and tmux do, late (a slow link), so that replies keep
// arriving while the prompt is shown. Nothing is approved or denied until
// the developer types y and Enter; then the request runs. Every prompt
// shows the mark printed when the session began.
func TestEscalationPromptFloodedWithQueries(t *testing.T) {
	s := escalationSandbox(t)
	pt := s.ptyTerminal(xterm, 300*time.Millisecond)
	m := pt.mark()
	pt.typeKeys("echo ready-$((6*7))\r")
	pt.waitOutput(m, "ready-42", 90*time.Second)
	mark := regexp.MustCompile(`show the mark ([A-Z0-9]{4}-[A-Z0-9]{4});`).FindStringSubmatch(pt.since(0))
	if mark == nil {
		t.Fatalf("the session's start printed no prompt mark:\n%q", tail(pt.since(0), 2000))
	}
	for _, p := range []personality{xterm, vte, tmuxReplies} {
		t.Run(p.name, func(t *testing.T) {
			marker := "flood-" + p.name
			pt.setPersonality(p)
			m := pt.mark()
			// The request follows the flood's start, so that replies are
			// on their way when the prompt opens.
			pt.typeKeys(flood(6, allQueries...) + "sleep 1; " + guestRun + " -- /usr/bin/echo " + marker + "; echo rc-" + marker + "=$?\r")
			pt.waitOutput(m, promptShown, 60*time.Second)
			shown := time.Now()
			assertPending(t, s, func() string { return pt.since(m) }, marker, 3*time.Second)
			pt.mu.Lock()
			last := pt.lastReply
			pt.mu.Unlock()
			if pt.repliedCount() == 0 || !last.After(shown) {
				t.Fatalf("the emulator answered %d queries as %s, the last at %v, none while the prompt was shown (from %v)", pt.repliedCount(), p.name, last, shown)
			}
			if !strings.Contains(pt.since(m), "--- mark "+mark[1]+" ---") {
				t.Errorf("the prompt does not show the session's mark %s:\n%q", mark[1], tail(pt.since(m), 3000))
			}
			pt.typeKeys("y", "\r")
			pt.waitOutput(m, "rc-"+marker+"=0", 60*time.Second)
			if got := s.developerAnswers(marker); len(got) == 0 || !strings.HasPrefix(got[0], "Approved") {
				t.Errorf("the typed approval: audit log %q", got)
			}
			// The flood ends, its last replies reach the shell's line;
			// Ctrl-C clears it for the next round. A reply landing after
			// the Ctrl-C would be typed into the next command, so the
			// round waits for the flood to say it ended (a background job:
			// Ctrl-C does not end it, and a loaded host starts and runs it
			// late, pauses included), then for the emulator to fall quiet.
			pt.waitOutput(m, floodEnded, 60*time.Second)
			pt.waitQuiet(t, 2*time.Second, 30*time.Second)
			pt.resetLine(t)
		})
	}
}

// TestEscalationPromptLegibleAfterHostileOutput: before its request, the
// sandbox confines scrolling to the top line and switches to the DEC
// line-drawing character set, which would leave only the prompt's last
// line on the screen, in the wrong glyphs; it also sets the default
// colours to black on black, begins a synchronized update and locks the
// keyboard (what tmux implements of these takes effect). The prompt
// resets all of it, is shown whole, and takes the typed answer.
func TestEscalationPromptLegibleAfterHostileOutput(t *testing.T) {
	s := escalationSandbox(t)
	a := s.terminal("a")
	a.ready()
	a.send(`printf '\033[1;1r\033(0\016\033]10;#000000\007\033]11;#000000\007\033[?2026h\033[2h'; `+guestRun+" --justification plain-words -- /usr/bin/echo hostile-state; echo rc-hostile=$?", "Enter")
	a.waitScreen("[y] approve  [n] deny  [e] edit the command", 60*time.Second)
	scr := a.screen()
	for _, want := range []string{"--- lazaret: host escalation request --- mark ", `command:       "/usr/bin/echo" "hostile-state"`, `justification: "plain-words"`} {
		if !strings.Contains(scr, want) {
			t.Errorf("the screen lacks %s; screen:\n%s", want, scr)
		}
	}
	a.send("n", "Enter")
	a.waitScreen("rc-hostile=125", 60*time.Second)
}

// TestEscalationPromptIgnoresDSRReplyAsTmux is the DSR attack with tmux's
// reply bytes from the emulator, across a link of 30 ms, so that the reply
// is in flight when the prompt opens: under a local tmux the reply comes
// back within a millisecond, and the attack depends on timing
// (TestEscalationPromptIgnoresTmuxDSRReply).
func TestEscalationPromptIgnoresDSRReplyAsTmux(t *testing.T) {
	s := escalationSandbox(t)
	pt := s.ptyTerminal(tmuxReplies, 30*time.Millisecond)
	m := pt.mark()
	pt.typeKeys("echo ready-$((6*7))\r")
	pt.waitOutput(m, "ready-42", 90*time.Second)

	m = pt.mark()
	pt.typeKeys(flood(8, qDSR) + guestRun + " -- /usr/bin/echo dsr-tmux-attack; echo rc-dsr-tmux-attack=$?\r")
	pt.waitOutput(m, promptShown, 60*time.Second)
	assertPending(t, s, func() string { return pt.since(m) }, "dsr-tmux-attack", 3*time.Second)
	if pt.repliedCount() == 0 {
		t.Fatal("the emulator answered no DSR query: the attack did not run")
	}
	time.Sleep(6 * time.Second)
	pt.typeKeys("y", "\r")
	pt.waitOutput(m, "rc-dsr-tmux-attack=0", 60*time.Second)
	if got := s.developerAnswers("dsr-tmux-attack"); len(got) == 0 || !strings.HasPrefix(got[0], "Approved") {
		t.Errorf("the typed approval: audit log %q", got)
	}
}
