package session

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// terminalReply is one terminal's reply to one query, as the terminal
// writes it on the program's input (docs/ESCALATION.md, "Terminal
// replies").
type terminalReply struct {
	terminal, query, reply string
}

// terminalReplies are the replies the prompt is proven against: none is a
// key event, and none contains Enter (CR or LF).
var terminalReplies = []terminalReply{
	{"xterm", "DA1", "\x1b[?64;1;2;6;9;15;16;17;18;21;22;28c"},
	{"xterm", "DA2", "\x1b[>41;379;0c"},
	{"xterm", "DECRQM ?2004", "\x1b[?2004;2$y"},
	{"xterm", "DECRQM ?2004, S8C1T", "\x9b?2004;2$y"},
	{"xterm", "CPR", "\x1b[24;80R"},
	{"xterm", "DSR 5", "\x1b[0n"},
	{"xterm", "OSC 10, BEL", "\x1b]10;rgb:0000/0000/0000\x07"},
	{"xterm", "OSC 11, ST", "\x1b]11;rgb:ffff/ffff/ffff\x1b\\"},
	{"xterm", "DECRQSS m", "\x1bP1$r0m\x1b\\"},
	{"xterm", "DECRQSS m, S8C1T", "\x901$r0m\x9c"},
	// S8C1T on a terminal in UTF-8 mode: each C1 control is sent as its
	// UTF-8 encoding, C2 9B for CSI, C2 90 for DCS, C2 9C for ST.
	{"xterm", "DECRQM ?2004, S8C1T, UTF-8", "\xc2\x9b?2004;2$y"},
	{"xterm", "DECRQSS m, S8C1T, UTF-8", "\xc2\x901$r0m\xc2\x9c"},
	{"xterm", "OSC 10, S8C1T, UTF-8", "\xc2\x9d10;rgb:0000/0000/0000\xc2\x9c"},
	{"xterm", "XTVERSION, S8C1T, UTF-8, a \u2713 in the name", "\xc2\x90>|XTerm(\xe2\x9c\x93y)\xc2\x9c"},
	{"xterm", "XTVERSION", "\x1bP>|XTerm(379)\x1b\\"},
	{"VTE", "DA1", "\x1b[?65;1;9c"},
	{"VTE", "DA2", "\x1b[>65;7600;1c"},
	{"VTE", "DECRQM ?2004", "\x1b[?2004;1$y"},
	{"VTE", "CPR", "\x1b[24;80R"},
	{"VTE", "DSR 5", "\x1b[0n"},
	{"VTE", "OSC 10", "\x1b]10;rgb:ffff/ffff/ffff\x07"},
	{"VTE", "OSC 11", "\x1b]11;rgb:1717/1717/1717\x1b\\"},
	{"kitty", "DA1", "\x1b[?62;c"},
	{"kitty", "DA2", "\x1b[>1;4000;29c"},
	{"kitty", "DECRQM ?2004", "\x1b[?2004;2$y"},
	{"kitty", "CPR", "\x1b[24;80R"},
	{"kitty", "DSR 5", "\x1b[0n"},
	{"kitty", "OSC 11", "\x1b]11;rgb:0000/0000/0000\x1b\\"},
	{"kitty", "DECRQSS m", "\x1bP1$r0m\x1b\\"},
	{"kitty", "XTVERSION", "\x1bP>|kitty(0.35.2)\x1b\\"},
	{"kitty", "keyboard flags CSI ? u", "\x1b[?0u"},
	{"iTerm2", "DA1", "\x1b[?62;4c"},
	{"iTerm2", "DA2", "\x1b[>0;95;0c"},
	{"iTerm2", "DECRQM ?2004", "\x1b[?2004;2$y"},
	{"iTerm2", "CPR", "\x1b[24;80R"},
	{"iTerm2", "DSR 5", "\x1b[0n"},
	{"iTerm2", "OSC 11", "\x1b]11;rgb:0000/0000/0000\x07"},
	{"iTerm2", "XTVERSION", "\x1bP>|iTerm2 3.5.0\x1b\\"},
	{"iTerm2", "OSC 1337 ReportCellSize", "\x1b]1337;ReportCellSize=17.0;8.0;2.0\x07"},
	{"tmux 3.3a", "DA1", "\x1b[?1;2c"},
	{"tmux 3.3a", "DA2", "\x1b[>84;0;0c"},
	{"tmux 3.3a", "CPR", "\x1b[1;1R"},
	{"tmux 3.3a", "DSR 5", "\x1b[0n"},
	{"tmux 3.3a", "XTVERSION", "\x1bP>|tmux 3.3a\x1b\\"},
	{"screen 4.09", "DA1", "\x1b[?1;2c"},
	{"screen 4.09", "DA2", "\x1b[>83;40900;0c"},
	{"screen 4.09", "CPR", "\x1b[24;80R"},
	{"screen 4.09", "DSR 5", "\x1b[0n"},
	{"Windows Terminal", "DA1", "\x1b[?61;4;6;7;14;21;22;23;24;28;32;42c"},
	{"Windows Terminal", "DA2", "\x1b[>0;10;1c"},
	{"Windows Terminal", "DECRQM ?2004", "\x1b[?2004;2$y"},
	{"Windows Terminal", "CPR", "\x1b[24;80R"},
	{"Windows Terminal", "DSR 5", "\x1b[0n"},
	{"Windows Terminal", "OSC 11", "\x1b]11;rgb:0c0c/0c0c/0c0c\x1b\\"},
	{"Windows Terminal", "DECRQSS m", "\x1bP1$r0m\x1b\\"},
	// Input a sandbox can cause by switching a report on.
	{"xterm", "focus in (mode 1004)", "\x1b[I"},
	{"xterm", "SGR mouse (mode 1006)", "\x1b[<0;89;121M"},
	{"xterm", "X10 mouse at column 89, row 89 (mode 1000)", "\x1b[M yy"},
	{"xterm", "UTF-8 mouse (mode 1005)", "\x1b[M \xc3\xb9y"},
}

// keys parses b whole and returns its key events.
func keysOf(b []byte) []rune {
	var k KeyParser
	evs := k.Feed(nil, b)
	evs = append(evs, k.Idle()...)
	var keys []rune
	for _, e := range evs {
		if e.Kind == EventKey {
			keys = append(keys, e.Rune)
		}
	}
	return keys
}

func TestNoTerminalReplyIsAKey(t *testing.T) {
	for _, r := range terminalReplies {
		t.Run(r.terminal+" "+r.query, func(t *testing.T) {
			if got := keysOf([]byte(r.reply)); len(got) != 0 {
				t.Errorf("reply %q parses to keys %q", r.reply, got)
			}
			// Split at every point, the halves joined by the parser.
			for i := 1; i < len(r.reply); i++ {
				var k KeyParser
				evs := k.Feed(nil, []byte(r.reply[:i]))
				evs = k.Feed(evs, []byte(r.reply[i:]))
				for _, e := range evs {
					if e.Kind == EventKey {
						t.Fatalf("reply %q split at %d gives key %q", r.reply, i, e.Rune)
					}
				}
			}
		})
	}
}

// TestNoTerminalReplyApproves proves the approval act against every
// reply: no reply contains Enter outside a paste, so even a reply cut at
// any point, with its tail read from the start as keys, after a y typed
// by the developer or alone, ends no choice; and a reply between a
// letter and Enter takes the letter back.
func TestNoTerminalReplyApproves(t *testing.T) {
	for _, r := range terminalReplies {
		t.Run(r.terminal+" "+r.query, func(t *testing.T) {
			if !strings.HasPrefix(r.reply, "\x1b[200~") && strings.ContainsAny(r.reply, "\r\n") {
				t.Fatalf("reply %q contains Enter", r.reply)
			}
			for i := 0; i < len(r.reply); i++ {
				for _, before := range []string{"", "y"} {
					if c := choiceOf([]byte(before + r.reply[i:])); c != 0 {
						t.Fatalf("%q then the reply's tail %q chooses %q", before, r.reply[i:], c)
					}
				}
			}
			if c := choiceOf([]byte("y" + r.reply + "\r")); c != 0 {
				t.Fatalf("y, the reply, Enter chooses %q; the reply should take the y back", c)
			}
			if c := choiceOf([]byte(r.reply + "y\r")); c != 'y' {
				t.Fatalf("the reply then y and Enter chooses %q, want y", c)
			}
		})
	}
}

// choiceOf runs the menu over b and returns the first choice.
func choiceOf(b []byte) rune {
	var k KeyParser
	var m menu
	evs := k.Feed(nil, b)
	evs = append(evs, k.Idle()...)
	for _, e := range evs {
		if c, _ := m.event(e); c != 0 {
			return c
		}
	}
	return 0
}

func TestKeyParser(t *testing.T) {
	key := func(r rune) Event { return Event{Kind: EventKey, Rune: r} }
	seq := Event{Kind: EventSequence}
	paste := Event{Kind: EventPaste}
	for _, tc := range []struct {
		name   string
		chunks []string
		idle   bool
		want   []Event
	}{
		{"plain keys", []string{"yn\r"}, false, []Event{key('y'), key('n'), key('\r')}},
		{"UTF-8 split across reads", []string{"\xc3", "\xa9!"}, false, []Event{key('é'), key('!')}},
		{"broken UTF-8 dropped", []string{"\xc3y"}, false, []Event{key('y')}},
		{"cursor key", []string{"\x1b[A"}, false, []Event{seq}},
		{"application cursor key (SS3)", []string{"\x1bOA"}, false, []Event{seq}},
		{"SS3 with modifiers", []string{"\x1bO1;5P"}, false, []Event{seq}},
		{"Alt-y", []string{"\x1by"}, false, []Event{seq}},
		{"Alt-Enter", []string{"\x1b\r"}, false, []Event{seq}},
		{"ESC alone then idle", []string{"\x1b"}, true, []Event{key(KeyEscape)}},
		{"CSI split across reads", []string{"\x1b[?20", "04;2$", "y"}, false, []Event{seq}},
		{"CSI cut short then idle", []string{"\x1b[?2004;2"}, true, []Event{seq}},
		{"OSC ended by BEL", []string{"\x1b]11;rgb:0/0/0\x07n"}, false, []Event{seq, key('n')}},
		{"OSC ended by ESC backslash split", []string{"\x1b]11;y\x1b", "\\n"}, false, []Event{seq, key('n')}},
		{"OSC payload with CR and y", []string{"\x1b]2;y\ry\x07"}, false, []Event{seq}},
		{"DCS", []string{"\x1bP>|XTerm(379)\x1b\\"}, false, []Event{seq}},
		{"APC", []string{"\x1b_Gi=1;OK\x1b\\"}, false, []Event{seq}},
		{"PM", []string{"\x1b^pm\x1b\\"}, false, []Event{seq}},
		{"SOS", []string{"\x1bXsos\x1b\\"}, false, []Event{seq}},
		{"8-bit CSI", []string{"\x9b0n"}, false, []Event{seq}},
		{"8-bit OSC ended by 8-bit ST", []string{"\x9d11;y\x9cy"}, false, []Event{seq, key('y')}},
		{"7-bit OSC not ended by 8-bit ST", []string{"\x1b]11;\x9cy\x07"}, false, []Event{seq}},
		{"8-bit SS3", []string{"\x8fA"}, false, []Event{seq}},
		{"8-bit DCS", []string{"\x90" + "1$r0m\x9c"}, false, []Event{seq}},
		{"string ended by a new ESC", []string{"\x1b]11;x\x1b[0n"}, false, []Event{seq, seq}},
		{"CAN cancels a CSI", []string{"\x1b[12\x18y"}, false, []Event{seq, key('y')}},
		{"control byte inside CSI is not a key", []string{"\x1b[1\ry"}, false, []Event{seq, key('y')}},
		{"bracketed paste", []string{"\x1b[200~y\r", "more\x1b[20", "1~n"}, false, []Event{paste, key('n')}},
		{"paste with an ESC inside", []string{"\x1b[200~\x1b[201\x1b[201~"}, false, []Event{paste}},
		{"paste not ended by idle", []string{"\x1b[200~y"}, true, nil},
		{"X10 mouse", []string{"\x1b[M yy\r"}, false, []Event{seq, key('\r')}},
		{"UTF-8 mouse", []string{"\x1b[M \xc3\xb9y", "n"}, false, []Event{seq, key('n')}},
		{"CSI M with parameters is not mouse", []string{"\x1b[2My"}, false, []Event{seq, key('y')}},
		{"ESC ESC [ A", []string{"\x1b\x1b[A"}, false, []Event{seq}},
		{"stray C1", []string{"\x85y"}, false, []Event{seq, key('y')}},
		{"overlong sequence dropped until idle", []string{"\x1b]" + strings.Repeat("y", MaxSequence) + "\x07y\r"}, true, []Event{seq}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k KeyParser
			var got []Event
			for _, c := range tc.chunks {
				got = k.Feed(got, []byte(c))
			}
			if tc.idle {
				got = append(got, k.Idle()...)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("events %+v, want %+v", got, tc.want)
			}
		})
	}
	t.Run("keys after an overlong sequence and a pause", func(t *testing.T) {
		var k KeyParser
		k.Feed(nil, []byte("\x1b["+strings.Repeat("1", MaxSequence+10)))
		k.Idle()
		if got := k.Feed(nil, []byte("y")); !slices.Equal(got, []Event{key('y')}) {
			t.Fatalf("after the pause: %+v", got)
		}
	})
}

func FuzzKeyParser(f *testing.F) {
	for _, r := range terminalReplies {
		f.Add([]byte(r.reply), uint8(3))
	}
	f.Add([]byte("y\r\x1b[A\x1b"), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, cut uint8) {
		// Cutting the input anywhere gives the same events.
		var whole, split KeyParser
		a := whole.Feed(nil, b)
		i := int(cut) % (len(b) + 1)
		s := split.Feed(nil, b[:i])
		s = split.Feed(s, b[i:])
		if !slices.Equal(a, s) {
			t.Fatalf("%q: whole %+v, cut at %d %+v", b, a, i, s)
		}
		// A key is only ever a byte of the input or a character of it.
		for _, e := range a {
			if e.Kind == EventKey && e.Rune != KeyEscape && !bytes.ContainsRune(b, e.Rune) {
				t.Fatalf("%q gives key %q, not in the input", b, e.Rune)
			}
		}
		// No input wrapped as a complete string sequence yields a key,
		// unless it ends the string itself.
		if !bytes.ContainsAny(b, "\x07\x1b\x18\x1a") {
			var k KeyParser
			for _, e := range k.Feed(nil, append(append([]byte("\x1b]"), b...), 0x07)) {
				if e.Kind == EventKey {
					t.Fatalf("OSC payload %q gives key %q", b, e.Rune)
				}
			}
		}
		if !whole.Pending() && len(whole.Idle()) != 0 {
			t.Fatal("Idle produced events with nothing pending")
		}
	})
}

// feed is a PromptInput over keys, each key one read; a read that ends
// with an ESC alone is followed by a pause, as a person's typing is.
func feed(keys ...string) *PromptInput {
	ch := make(chan keyChunk)
	go func() {
		defer close(ch)
		for _, k := range keys {
			ch <- keyChunk{b: []byte(k)}
			if strings.HasSuffix(k, "\x1b") {
				time.Sleep(3 * escIdle)
			}
		}
	}()
	return newPromptInput("MARK-TEST", ch, nil)
}

func TestTerminalPrompter(t *testing.T) {
	tp := protocol.TerminalPrompt{
		RequestID: ids.RequestID{7}, RequestSHA256: ids.Digest{8}, AgentProfile: "dev",
		CommandArgv: []string{"/usr/bin/git", "push\x1b[2J"}, Justification: "ship\x07it",
	}
	for _, tc := range []struct {
		name     string
		keys     []string
		decision protocol.DeveloperDecisionKind
		argv     []string
		err      error
	}{
		{"approve", []string{"x", "y", "\r"}, protocol.DecisionApprove, tp.CommandArgv, nil},
		{"approve in one read", []string{"y\r"}, protocol.DecisionApprove, tp.CommandArgv, nil},
		{"deny", []string{"N", "\r"}, protocol.DecisionDeny, nil, nil},
		{"y alone decides nothing", []string{"y"}, 0, nil, ErrTerminalClosed},
		{"the last letter counts", []string{"y", "n", "\r"}, protocol.DecisionDeny, nil, nil},
		{"Backspace takes the letter back", []string{"y", "\x7f", "\r", "n", "\r"}, protocol.DecisionDeny, nil, nil},
		{"a reply between y and Enter", []string{"y", "\x1b[?2004;2$y", "\r", "n\r"}, protocol.DecisionDeny, nil, nil},
		{"replies alone", []string{"\x1b[?2004;2$y", "\x1b[0n", "\x1b]11;rgb:0/0/0\x07", "\x1b[M yy"}, 0, nil, ErrTerminalClosed},
		{"a paste of y and Enter", []string{"\x1b[200~y\r\x1b[201~"}, 0, nil, ErrTerminalClosed},
		{"edit then approve", []string{"e", "\r", "\x15", "/usr/bin/git status 'a b'", "\r", "y", "\r"}, protocol.DecisionApprove, []string{"/usr/bin/git", "status", "a b"}, nil},
		{"edit with backspace", []string{"e\r", "\x15/usr/bin/tru", "ee\x7f", "\x1b[D", "\r", "y\r"}, protocol.DecisionApprove, []string{"/usr/bin/true"}, nil},
		{"replies in the editor are not text", []string{"e\r", "\x15/usr/bin/true", "\x1b[?2004;2$y\x1b[0n", "\r", "y\r"}, protocol.DecisionApprove, []string{"/usr/bin/true"}, nil},
		{"bad edit keeps the request", []string{"e\r", "\x15/bin/echo |", "\r", "y\r"}, protocol.DecisionApprove, tp.CommandArgv, nil},
		{"abandoned edit", []string{"e\r", "\x15/bin/x", "\x1b", "n\r"}, protocol.DecisionDeny, nil, nil},
		{"terminal closed", nil, 0, nil, ErrTerminalClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			d, err := TerminalPrompter{W: &out}.Decide(tp, feed(tc.keys...))
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !strings.Contains(out.String(), "mark MARK-TEST") {
				t.Fatalf("the prompt does not show the session's mark: %q", out.String())
			}
			if err != nil {
				return
			}
			if d.Decision != tc.decision || !slices.Equal(d.ApprovedCommandArgv, tc.argv) || d.RequestID != tp.RequestID || d.RequestSHA256 != tp.RequestSHA256 {
				t.Fatalf("decision %+v", d)
			}
			if strings.Contains(out.String(), "\x1b[2J") || strings.Contains(out.String(), "\x07") {
				t.Fatalf("the prompt wrote request bytes raw: %q", out.String())
			}
			if !strings.Contains(out.String(), `"push\x1b[2J"`) || !strings.Contains(out.String(), `"ship\ait"`) {
				t.Fatalf("the prompt does not show the request visibly: %q", out.String())
			}
			if !strings.HasPrefix(out.String(), promptReset) {
				t.Fatalf("the prompt does not reset the rendering state first: %q", out.String())
			}
		})
	}
}

// TestPromptInputDropsInputBeforeReady checks that chunks read before the
// prompt was drawn (an older epoch) never decide, and that after input
// was discarded, what arrives before the first pause is dropped too (the
// rest of a reply cut by the flush).
func TestPromptInputDropsInputBeforeReady(t *testing.T) {
	ch := make(chan keyChunk, 8)
	ch <- keyChunk{epoch: 0, b: []byte("y\r")}
	ch <- keyChunk{epoch: 1, b: []byte("2$y")}
	flushed := false
	in := newPromptInput("M", ch, func() (uint64, bool) { flushed = true; return 1, false })
	in.Ready()
	if !flushed {
		t.Fatal("Ready did not flush")
	}
	go func() {
		time.Sleep(3 * escIdle)
		ch <- keyChunk{epoch: 1, b: []byte("n")}
		close(ch)
	}()
	var got []Event
	for {
		ev, err := in.Next()
		if err != nil {
			break
		}
		got = append(got, ev)
	}
	if want := []Event{{Kind: EventKey, Rune: 'n'}}; !slices.Equal(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
}

func TestPasteMode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		on     bool
	}{
		{"never set", []string{"hello"}, false},
		{"set", []string{"a\x1b[?2004hb"}, true},
		{"set then reset", []string{"\x1b[?2004h", "x\x1b[?2004l"}, false},
		{"set split across writes", []string{"ab\x1b[?20", "04h"}, true},
		{"set split into bytes", strings.Split("\x1b[?2004h", ""), true},
		{"reset split after set", []string{"\x1b[?2004h\x1b[?2", "004l"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m pasteMode
			for _, w := range tc.writes {
				m.observe([]byte(w))
			}
			if m.on != tc.on {
				t.Fatalf("on %v, want %v", m.on, tc.on)
			}
		})
	}
}
