package broker

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// Scheme says where a credential goes in a request.
type Scheme uint8

// The schemes a credential can be presented in.
const (
	SchemeBearer Scheme = iota + 1 // Authorization: Bearer <value>
	SchemeHeader                   // <Header>: <value>, e.g. x-api-key
	SchemeBasic                    // Authorization: Basic base64(<user>:<value>); the value is the password
)

// String returns the scheme's configuration word: "bearer", "header" or
// "basic".
func (s Scheme) String() string {
	switch s {
	case SchemeBearer:
		return "bearer"
	case SchemeHeader:
		return "header"
	case SchemeBasic:
		return "basic"
	}
	return "scheme(" + strconv.Itoa(int(s)) + ")"
}

// ParseScheme returns the scheme named by s, one of "bearer", "header" and
// "basic".
func ParseScheme(s string) (Scheme, error) {
	for _, sc := range []Scheme{SchemeBearer, SchemeHeader, SchemeBasic} {
		if s == sc.String() {
			return sc, nil
		}
	}
	return 0, fmt.Errorf("credential scheme %q: %w", s, ErrUnknownScheme)
}

// Destination is a host and TCP port a credential may be sent to. Host is a
// lowercase DNS name without a trailing dot.
type Destination struct {
	Host string
	Port uint16
}

// String returns the destination as "host:port".
func (d Destination) String() string {
	return net.JoinHostPort(d.Host, strconv.Itoa(int(d.Port)))
}

// Credential is one secret the broker holds for the sandbox. The sandbox
// sees Placeholder under the environment variable Name; the broker swaps it
// for Value in requests to Destinations, in the field Scheme and Header say.
//
// A Credential prints redacted under every fmt verb: neither Value nor
// Placeholder ever appears in formatted output.
type Credential struct {
	// Name is the sandbox's environment variable, e.g. ANTHROPIC_API_KEY;
	// it appears in logs and refusal reasons.
	Name string
	// Scheme says which header field carries the credential and in what
	// form.
	Scheme Scheme
	// Header is the lowercase header field name for SchemeHeader, e.g.
	// "x-api-key", and empty otherwise.
	Header string
	// Destinations are where the credential may be sent.
	Destinations []Destination
	// Placeholder is what the sandbox holds instead of Value.
	Placeholder string
	// Value is the real secret.
	Value string
	// UpstreamCA is optional PEM: roots trusted for this credential's
	// destinations in addition to the system roots.
	UpstreamCA []byte
}

// Format prints c with Value and Placeholder redacted, whatever the verb.
func (c Credential) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "broker.Credential{Name:%q, Scheme:%s, Header:%q, Destinations:%v, Placeholder:[redacted], Value:[redacted]}",
		c.Name, c.Scheme, c.Header, c.Destinations)
}

// Field returns the lowercase header field name c travels in.
func (c *Credential) Field() string {
	if c.Scheme == SchemeHeader {
		return c.Header
	}
	return "authorization"
}

// Allows reports whether d is one of c's destinations.
func (c *Credential) Allows(d Destination) bool {
	for _, cd := range c.Destinations {
		if cd == d {
			return true
		}
	}
	return false
}

// DestinationList returns c's destinations as "a:443, b:443".
func (c *Credential) DestinationList() string {
	s := make([]string, len(c.Destinations))
	for i, d := range c.Destinations {
		s[i] = d.String()
	}
	return strings.Join(s, ", ")
}

// MaxValueLen is the longest value the broker accepts, in bytes.
const MaxValueLen = 4096

// CheckValue reports why v cannot be brokered: it is empty, longer than
// MaxValueLen bytes, or holds a byte outside printable ASCII (0x21..0x7e).
// The error never contains v.
func CheckValue(v string) error {
	if v == "" {
		return ErrEmptyValue
	}
	if len(v) > MaxValueLen {
		return fmt.Errorf("%d bytes: %w", len(v), ErrLongValue)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return fmt.Errorf("byte %d: %w", i, ErrValueByte)
		}
	}
	return nil
}

// minEntropyBits is the least randomness a placeholder must carry.
const minEntropyBits = 64

// NewPlaceholder returns a value of the same shape as v, drawn from rand: the
// same length; a prefix up to and including the last '-' or '_' among the
// first 24 bytes kept (e.g. "sk-ant-api03-"); after it, every ASCII letter
// replaced by a random letter of the same case and every digit by a random
// digit, other bytes kept. The result never equals v. If the randomised part
// would carry fewer than 64 bits of entropy, the value is too short to broker
// and NewPlaceholder returns ErrShortValue.
func NewPlaceholder(v string, rand io.Reader) (string, error) {
	if err := CheckValue(v); err != nil {
		return "", err
	}
	start := placeholderPrefix(v)
	if placeholderEntropy(v[start:]) < minEntropyBits {
		return "", ErrShortValue
	}
	src := &randSource{r: rand}
	for {
		p := []byte(v)
		for i := start; i < len(p); i++ {
			p[i] = src.sameClass(p[i])
		}
		if src.err != nil {
			return "", fmt.Errorf("drawing a placeholder: %w", src.err)
		}
		if string(p) != v {
			return string(p), nil
		}
	}
}

// placeholderPrefix returns the length of v's kept prefix: up to and
// including the last '-' or '_' among its first 24 bytes.
func placeholderPrefix(v string) int {
	head := v[:min(len(v), 24)]
	return strings.LastIndexAny(head, "-_") + 1
}

// placeholderEntropy returns the bits of randomness a placeholder drawn over
// s carries, in bits.
func placeholderEntropy(s string) float64 {
	const letterBits, digitBits = 4.700439718141092, 3.321928094887362 // log2(26), log2(10)
	var b float64
	for i := 0; i < len(s); i++ {
		switch CharClass(s[i]) {
		case 'a', 'A':
			b += letterBits
		case '0':
			b += digitBits
		}
	}
	return b
}

// CharClass returns 'a' for a lowercase letter, 'A' for an uppercase one, '0'
// for a digit and 0 for any other byte.
func CharClass(c byte) byte {
	switch {
	case c >= 'a' && c <= 'z':
		return 'a'
	case c >= 'A' && c <= 'Z':
		return 'A'
	case c >= '0' && c <= '9':
		return '0'
	}
	return 0
}

// randSource draws uniform small numbers from a byte stream, keeping the
// first read error.
type randSource struct {
	r   io.Reader
	buf [64]byte
	n   int
	err error
}

// sameClass returns a random byte of c's class, or c if it has none.
func (s *randSource) sameClass(c byte) byte {
	switch CharClass(c) {
	case 'a':
		return 'a' + s.below(26)
	case 'A':
		return 'A' + s.below(26)
	case '0':
		return '0' + s.below(10)
	}
	return c
}

// below returns a uniform number in [0, n) by rejection sampling.
func (s *randSource) below(n byte) byte {
	limit := 256 - 256%uint(n)
	for s.err == nil {
		b := s.next()
		if uint(b) < limit {
			return b % n
		}
	}
	return 0
}

// next returns the next random byte.
func (s *randSource) next() byte {
	if s.n == 0 {
		if _, err := io.ReadFull(s.r, s.buf[:]); err != nil {
			s.err = err
			return 0
		}
		s.n = len(s.buf)
	}
	s.n--
	return s.buf[s.n]
}

// checkHost reports why h is not a lowercase strict DNS name: labels of 1 to
// 63 bytes of a-z, 0-9 and inner hyphens, 253 bytes at most, no trailing dot.
func checkHost(h string) error {
	if h == "" || len(h) > 253 {
		return ErrHostName
	}
	for _, label := range strings.Split(h, ".") {
		if !validLabel(label) {
			return ErrHostName
		}
	}
	return nil
}

// validLabel reports whether l is one strict lowercase DNS label.
func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; CharClass(c) != 'a' && CharClass(c) != '0' && c != '-' {
			return false
		}
	}
	return true
}
