package codec

import (
	"errors"
	"fmt"
)

// ErrUnknownVariant reports an enumeration name outside its closed set.
var ErrUnknownVariant = errors.New("unknown enumeration variant")

// EnumName returns names[v]; index 0 is reserved for the invalid zero value
// and must be the empty string, so that a record missing an enumeration field
// fails validation instead of silently taking the first variant.
func EnumName[T ~uint8](v T, names []string) string {
	if int(v) <= 0 || int(v) >= len(names) {
		return fmt.Sprintf("invalid(%d)", uint8(v))
	}
	return names[v]
}

// EnumValid reports whether v names a variant.
func EnumValid[T ~uint8](v T, names []string) bool {
	return int(v) > 0 && int(v) < len(names)
}

// EnumText is MarshalText for an enumeration: what names the type.
func EnumText[T ~uint8](v T, names []string, what string) ([]byte, error) {
	if !EnumValid(v, names) {
		return nil, fmt.Errorf("encoding %s %d: %w", what, uint8(v), ErrUnknownVariant)
	}
	return []byte(names[v]), nil
}

// EnumParse is UnmarshalText for an enumeration.
func EnumParse[T ~uint8](b []byte, names []string, what string) (T, error) {
	for i := 1; i < len(names); i++ {
		if names[i] == string(b) {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("decoding %s %q: %w", what, b, ErrUnknownVariant)
}
