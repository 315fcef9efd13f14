package broker

import "errors"

// Rule violations of a broker configuration; test with errors.Is. Errors that
// wrap them name the credential, field or host concerned, never a value.
var (
	ErrUnknownScheme    = errors.New("unknown credential scheme (want bearer, header or basic)")
	ErrEmptyValue       = errors.New("value is empty")
	ErrLongValue        = errors.New("value is longer than 4096 bytes")
	ErrValueByte        = errors.New("value holds a byte outside printable ASCII (0x21 to 0x7e)")
	ErrShortValue       = errors.New("value is too short to broker: its placeholder would carry fewer than 64 bits of randomness")
	ErrHostName         = errors.New("not a lowercase DNS name")
	ErrNoHosts          = errors.New("a broker authority needs at least one host")
	ErrDuplicate        = errors.New("given more than once")
	ErrNotBrokered      = errors.New("not a host of the broker authority")
	ErrNoAuthority      = errors.New("configuration has no authority")
	ErrCredentialName   = errors.New("credential name must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
	ErrPlaceholderShape = errors.New("placeholder must be as long as the value and differ from it")
	ErrPlaceholderClash = errors.New("placeholder occurs within another credential's placeholder or value")
	ErrHeaderName       = errors.New("header must be a lowercase token and not a reserved field")
	ErrNoDestinations   = errors.New("credential has no destinations")
	ErrZeroPort         = errors.New("port must be nonzero")
	ErrFieldClaimed     = errors.New("two credentials claim the same header field at the same destination")
	ErrUpstreamCA       = errors.New("upstream CA holds no PEM certificate")
	ErrAuthorityKey     = errors.New("authority key does not match its certificate")
)
