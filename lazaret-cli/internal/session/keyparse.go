package session

import "unicode/utf8"

// A terminal's input carries two kinds of bytes: keys the developer types,
// and sequences: escape sequences of function keys, mouse and focus
// reports, bracketed pastes, and the terminal's replies to queries that a
// program printed. A program in the sandbox can print queries, so replies
// are the sandbox's words, not the developer's: KeyParser separates the
// two, and only keys may answer a prompt.

// EventKind says what an input event is.
type EventKind uint8

const (
	// EventKey is one key: a printable character or a C0 control byte
	// (Enter is '\r', Backspace 0x7f, Ctrl-C 0x03), or KeyEscape.
	EventKey EventKind = iota + 1
	// EventSequence is a complete escape or control sequence (ESC x,
	// CSI, SS3, OSC, DCS, APC, PM, SOS, an X10 mouse report) or one cut
	// short; never a key.
	EventSequence
	// EventPaste is a bracketed paste (CSI 200 ~ ... CSI 201 ~); its
	// content is not delivered.
	EventPaste
)

// KeyEscape is the Rune of the Escape key: an ESC that nothing followed
// before the input went idle.
const KeyEscape rune = 0x1b

// MaxSequence bounds the length of one sequence. A longer one is
// abandoned, and everything up to the next pause in the input (Idle) is
// dropped with it, so that no byte of it is ever read as a key.
const MaxSequence = 4096

// Event is one input event.
type Event struct {
	Kind EventKind
	// Rune is the key of an EventKey.
	Rune rune
}

type parseState uint8

const (
	stGround    parseState = iota
	stUTF8                 // inside a multi-byte UTF-8 character
	stEsc                  // after ESC
	stEscInter             // ESC, intermediates, waiting for the final byte
	stCSI                  // CSI or SS3 parameters and intermediates
	stMouse                // the three characters after CSI M
	stString               // OSC, DCS, APC, PM or SOS payload
	stStringEsc            // ESC inside a string: ST or a new sequence
	stPaste                // inside a bracketed paste
	stSkip                 // an overlong sequence: everything dropped until Idle
)

// pasteEnd ends a bracketed paste.
const pasteEnd = "\x1b[201~"

// KeyParser splits terminal input into events. It is a pure state machine:
// Feed may be called with input cut anywhere, sequences split across calls
// are joined, and Idle is called when no input arrived for a short while
// (an ESC alone is then the Escape key, and a sequence cut short is
// dropped). The zero value is ready.
type KeyParser struct {
	state parseState
	// length counts the bytes of the current sequence.
	length int
	// eightBit: the current string began with an 8-bit introducer, so
	// the 8-bit ST ends it: the byte 0x9c, or, when the introducer came
	// UTF-8 encoded (c1UTF8), the character U+009C, bytes C2 9C, so that
	// a 0x9c continuation byte of another character does not end it.
	eightBit, c1UTF8 bool
	// prev is the byte before c inside a string.
	prev byte
	// csiSS3: the current CSI is SS3; csiPlain: it has had no parameter
	// or intermediate byte yet (CSI M is then an X10 mouse report).
	csiSS3, csiPlain bool
	// mouseLeft is how many characters of a mouse report remain to
	// begin, mouseCont how many continuation bytes the current one needs.
	mouseLeft, mouseCont int
	// paste matches pasteEnd inside a paste: how many bytes matched.
	paste int
	// csiParams collects up to the first 3 parameter bytes of a CSI, to
	// recognise CSI 200 ~.
	csiParams [3]byte
	csiN      int
	// utf8 collects a multi-byte character.
	utf8     [utf8.UTFMax]byte
	utf8N    int
	utf8Want int
}

// Pending reports whether input so far ends inside a sequence or
// character, so that the caller should call Idle after a pause.
func (k *KeyParser) Pending() bool { return k.state != stGround && k.state != stPaste }

// Idle ends what a pause in the input ends: an ESC alone becomes
// KeyEscape, any other cut sequence or character is dropped as a
// sequence. A bracketed paste goes on until its end.
func (k *KeyParser) Idle() []Event {
	switch k.state {
	case stGround, stPaste:
		return nil
	case stEsc:
		k.state = stGround
		return []Event{{Kind: EventKey, Rune: KeyEscape}}
	case stSkip:
		k.state = stGround
		return nil
	default:
		k.state = stGround
		return []Event{{Kind: EventSequence}}
	}
}

// Feed parses b and appends its events to evs.
func (k *KeyParser) Feed(evs []Event, b []byte) []Event {
	for _, c := range b {
		evs = k.byte(evs, c)
	}
	return evs
}

func (k *KeyParser) seq(evs []Event) []Event {
	k.state = stGround
	return append(evs, Event{Kind: EventSequence})
}

// begin enters state s as the start of a sequence.
func (k *KeyParser) begin(s parseState, eightBit bool) {
	k.state, k.length, k.eightBit, k.c1UTF8, k.prev = s, 1, eightBit, false, 0
	k.csiSS3, k.csiPlain, k.csiN = false, true, 0
}

func (k *KeyParser) byte(evs []Event, c byte) []Event {
	if k.state != stGround && k.state != stUTF8 && k.state != stPaste && k.state != stSkip {
		k.length++
		if k.length > MaxSequence {
			k.state = stSkip
			return append(evs, Event{Kind: EventSequence})
		}
	}
	switch k.state {
	case stGround:
		return k.ground(evs, c)
	case stUTF8:
		if c&0xc0 != 0x80 {
			// A broken character is dropped; c starts afresh.
			k.state = stGround
			return k.ground(evs, c)
		}
		k.utf8[k.utf8N] = c
		k.utf8N++
		if k.utf8N < k.utf8Want {
			return evs
		}
		k.state = stGround
		r, _ := utf8.DecodeRune(k.utf8[:k.utf8N])
		if r == utf8.RuneError {
			return evs
		}
		if r >= 0x80 && r <= 0x9f {
			// A C1 control encoded as UTF-8: how a terminal in UTF-8
			// mode sends 8-bit controls (after the sandbox printed
			// S8C1T, ESC SP G). It introduces a sequence exactly as
			// the raw byte does; it is never a key.
			evs = k.ground(evs, byte(r))
			k.c1UTF8 = k.state != stGround
			return evs
		}
		return append(evs, Event{Kind: EventKey, Rune: r})
	case stEsc:
		switch {
		case c == '[':
			k.begin(stCSI, false)
		case c == 'O':
			k.begin(stCSI, false)
			k.csiSS3 = true
		case c == ']' || c == 'P' || c == '_' || c == '^' || c == 'X':
			k.begin(stString, false)
		case c == 0x1b:
			// ESC ESC: the first is a meta prefix; stay after ESC.
			k.begin(stEsc, false)
		case c == 0x18 || c == 0x1a:
			return k.seq(evs)
		case c >= 0x20 && c <= 0x2f:
			k.state = stEscInter
		case c < 0x20 || c == 0x7f:
			// ESC then a control key (Alt-Enter, Alt-Backspace): one
			// sequence, never the key itself.
			return k.seq(evs)
		default:
			// ESC and a final byte: Alt and a key, or a 2-byte escape.
			return k.seq(evs)
		}
		return evs
	case stEscInter:
		switch {
		case c >= 0x20 && c <= 0x2f:
			return evs
		case c == 0x1b:
			k.begin(stEsc, false)
			return append(evs, Event{Kind: EventSequence})
		default:
			return k.seq(evs)
		}
	case stCSI:
		return k.csi(evs, c)
	case stMouse:
		// An X10 mouse report: three characters, each UTF-8 in mode 1005.
		if k.mouseCont > 0 && c&0xc0 == 0x80 {
			k.mouseCont--
			if k.mouseCont == 0 && k.mouseLeft == 0 {
				return k.seq(evs)
			}
			return evs
		}
		k.mouseCont = 0
		if k.mouseLeft == 0 {
			// The last character was cut short; c is outside the report.
			k.state = stGround
			return k.ground(append(evs, Event{Kind: EventSequence}), c)
		}
		k.mouseLeft--
		switch {
		case c >= 0xc2 && c < 0xe0:
			k.mouseCont = 1
		case c >= 0xe0 && c < 0xf0:
			k.mouseCont = 2
		case c >= 0xf0 && c <= 0xf4:
			k.mouseCont = 3
		}
		if k.mouseCont == 0 && k.mouseLeft == 0 {
			return k.seq(evs)
		}
		return evs
	case stString:
		prev := k.prev
		k.prev = c
		switch {
		case c == 0x07:
			return k.seq(evs)
		case c == 0x9c && k.eightBit && (!k.c1UTF8 || prev == 0xc2):
			return k.seq(evs)
		case c == 0x1b:
			k.state = stStringEsc
		case c == 0x18 || c == 0x1a:
			return k.seq(evs)
		}
		return evs
	case stStringEsc:
		if c == '\\' {
			return k.seq(evs)
		}
		// The string ends without ST; ESC began a new sequence.
		evs = append(evs, Event{Kind: EventSequence})
		k.begin(stEsc, false)
		return k.byte(evs, c)
	case stPaste:
		if c == pasteEnd[k.paste] {
			k.paste++
			if k.paste == len(pasteEnd) {
				k.state = stGround
				return append(evs, Event{Kind: EventPaste})
			}
			return evs
		}
		k.paste = 0
		if c == pasteEnd[0] {
			k.paste = 1
		}
		return evs
	case stSkip:
		return evs
	}
	return evs
}

func (k *KeyParser) ground(evs []Event, c byte) []Event {
	switch {
	case c == 0x1b:
		k.begin(stEsc, false)
	case c == 0x9b:
		k.begin(stCSI, true)
	case c == 0x8f:
		k.begin(stCSI, true)
		k.csiSS3 = true
	case c == 0x9d || c == 0x90 || c == 0x9f || c == 0x9e || c == 0x98:
		k.begin(stString, true)
	case c < 0x80:
		return append(evs, Event{Kind: EventKey, Rune: rune(c)})
	case c >= 0xc2 && c <= 0xf4:
		k.state = stUTF8
		k.utf8[0] = c
		k.utf8N = 1
		switch {
		case c < 0xe0:
			k.utf8Want = 2
		case c < 0xf0:
			k.utf8Want = 3
		default:
			k.utf8Want = 4
		}
	default:
		// Another C1 control or a stray continuation byte: a
		// sequence of its own.
		return append(evs, Event{Kind: EventSequence})
	}
	return evs
}

func (k *KeyParser) csi(evs []Event, c byte) []Event {
	switch {
	case c >= 0x30 && c <= 0x3f: // parameter bytes
		if k.csiN < len(k.csiParams) {
			k.csiParams[k.csiN] = c
		}
		k.csiN++
		k.csiPlain = false
		return evs
	case c >= 0x20 && c <= 0x2f: // intermediate bytes
		k.csiN = len(k.csiParams) + 1
		k.csiPlain = false
		return evs
	case c >= 0x40 && c <= 0x7e: // the final byte
		switch {
		case !k.csiSS3 && c == '~' && k.csiN == 3 && k.csiParams == [3]byte{'2', '0', '0'}:
			k.state, k.paste = stPaste, 0
			return evs
		case !k.csiSS3 && c == 'M' && k.csiPlain:
			k.state, k.mouseLeft, k.mouseCont = stMouse, 3, 0
			return evs
		}
		return k.seq(evs)
	case c == 0x1b:
		k.begin(stEsc, false)
		return append(evs, Event{Kind: EventSequence})
	default:
		// A control byte or DEL cancels the sequence (CAN and SUB by
		// definition); the byte itself is dropped with it, so that no
		// key comes out of a sequence's middle.
		return k.seq(evs)
	}
}
