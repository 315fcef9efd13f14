package phase

import "lazaret.dev/pkg/store/codec"

// Domain is a Domain phase: an element of DomainPhases (Lazaret.tla line
// 70) and the value set of Generation.durable_decision.
type Domain uint8

// Domain phases, in the model's order.
const (
	DomainAbsent Domain = iota + 1
	DomainStarting
	DomainReady
	DomainStopping
	DomainFailed
	DomainRecovering
)

// NumDomain is the number of Domain phases.
const NumDomain = 6

var domainNames = []string{"", "Absent", "Starting", "Ready", "Stopping", "Failed", "Recovering"}

// Domains lists every Domain phase in the model's order.
func Domains() []Domain {
	return []Domain{DomainAbsent, DomainStarting, DomainReady, DomainStopping, DomainFailed, DomainRecovering}
}

// String is the model's name of d, "invalid(N)" outside the set.
func (d Domain) String() string { return codec.EnumName(d, domainNames) }

// Valid reports whether d is a Domain phase.
func (d Domain) Valid() bool { return codec.EnumValid(d, domainNames) }

// MarshalText is d's name; an invalid d is an error.
func (d Domain) MarshalText() ([]byte, error) {
	return codec.EnumText(d, domainNames, "domain phase")
}

// UnmarshalText parses a name MarshalText writes.
func (d *Domain) UnmarshalText(b []byte) error {
	v, err := codec.EnumParse[Domain](b, domainNames, "domain phase")
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Index is d's dense number from 0 in the model's order (DomainAbsent is
// 0), -1 for an invalid d.
func (d Domain) Index() int {
	if !d.Valid() {
		return -1
	}
	return int(d) - 1
}

// DomainAt is the Domain phase of dense number i (the inverse of Index),
// the invalid zero Domain when i is out of range.
func DomainAt(i int) Domain {
	if i < 0 || i >= NumDomain {
		return 0
	}
	return Domain(i + 1)
}

// Session is a Session phase: an element of SessionPhases (Lazaret.tla
// line 83) and the value set of Session.session_phase.
type Session uint8

// Session phases, in the model's order.
const (
	SessionNew Session = iota + 1
	SessionWaiting
	SessionRegistering
	SessionAttached
	SessionPrompting
	SessionHostExecuting
	SessionClosed
	SessionFailed
)

// NumSession is the number of Session phases.
const NumSession = 8

var sessionNames = []string{"", "New", "Waiting", "Registering", "Attached", "Prompting", "HostExecuting", "Closed", "Failed"}

// Sessions lists every Session phase in the model's order.
func Sessions() []Session {
	return []Session{SessionNew, SessionWaiting, SessionRegistering, SessionAttached,
		SessionPrompting, SessionHostExecuting, SessionClosed, SessionFailed}
}

// String is the model's name of s, "invalid(N)" outside the set.
func (s Session) String() string { return codec.EnumName(s, sessionNames) }

// Valid reports whether s is a Session phase.
func (s Session) Valid() bool { return codec.EnumValid(s, sessionNames) }

// MarshalText is s's name; an invalid s is an error.
func (s Session) MarshalText() ([]byte, error) {
	return codec.EnumText(s, sessionNames, "session phase")
}

// UnmarshalText parses a name MarshalText writes.
func (s *Session) UnmarshalText(b []byte) error {
	v, err := codec.EnumParse[Session](b, sessionNames, "session phase")
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Index is s's dense number from 0 in the model's order (SessionNew is
// 0), -1 for an invalid s.
func (s Session) Index() int {
	if !s.Valid() {
		return -1
	}
	return int(s) - 1
}

// SessionAt is the Session phase of dense number i (the inverse of
// Index), the invalid zero Session when i is out of range.
func SessionAt(i int) Session {
	if i < 0 || i >= NumSession {
		return 0
	}
	return Session(i + 1)
}
