package codec

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// ErrNonCanonical reports input that decodes but is not the canonical
// encoding of the decoded value.
var ErrNonCanonical = errors.New("value is not in canonical deterministic CBOR form")

// ErrDecode wraps every failure to decode a stored value.
var ErrDecode = errors.New("undecodable stored value")

var (
	encMode  cbor.EncMode
	decMode  cbor.DecMode
	anyMode  cbor.DecMode
	openMode cbor.DecMode
)

func init() {
	eo := cbor.CoreDetEncOptions()
	eo.TextMarshaler = cbor.TextMarshalerTextString
	eo.String = cbor.StringToTextString
	eo.FieldName = cbor.FieldNameToTextString
	eo.IndefLength = cbor.IndefLengthForbidden
	eo.TagsMd = cbor.TagsForbidden
	var err error
	if encMode, err = eo.EncMode(); err != nil {
		panic(fmt.Sprintf("building CBOR encoding mode: %v", err))
	}
	do := cbor.DecOptions{
		DupMapKey:          cbor.DupMapKeyEnforcedAPF,
		IndefLength:        cbor.IndefLengthForbidden,
		TagsMd:             cbor.TagsForbidden,
		ExtraReturnErrors:  cbor.ExtraDecErrorUnknownField,
		FieldNameMatching:  cbor.FieldNameMatchingCaseSensitive,
		TextUnmarshaler:    cbor.TextUnmarshalerTextString,
		ByteStringToString: cbor.ByteStringToStringForbidden,
		MaxNestedLevels:    16,
		MaxArrayElements:   4096,
		MaxMapPairs:        256,
		IntDec:             cbor.IntDecConvertSignedOrFail,
	}
	if decMode, err = do.DecMode(); err != nil {
		panic(fmt.Sprintf("building CBOR decoding mode: %v", err))
	}
	ao := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  16,
		MaxArrayElements: 4096,
		MaxMapPairs:      256,
		DefaultMapType:   reflect.TypeOf(map[string]any(nil)),
	}
	if anyMode, err = ao.DecMode(); err != nil {
		panic(fmt.Sprintf("building CBOR generic decoding mode: %v", err))
	}
	oo := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  16,
		MaxArrayElements: 4096,
		MaxMapPairs:      256,
	}
	if openMode, err = oo.DecMode(); err != nil {
		panic(fmt.Sprintf("building CBOR open decoding mode: %v", err))
	}
}

// Marshal returns the deterministic encoding of v.
func Marshal(v any) ([]byte, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal decodes exactly one canonical value from b into v (a pointer).
// Every error wraps ErrDecode.
func Unmarshal(b []byte, v any) error {
	if err := decMode.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	again, err := encMode.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: re-encoding %T: %w", ErrDecode, v, err)
	}
	if !bytes.Equal(again, b) {
		return fmt.Errorf("%w: %w", ErrDecode, ErrNonCanonical)
	}
	return nil
}

// UnmarshalOpen decodes b into v while ignoring map keys that v does not
// name. It exists for the one record that must stay readable across schema
// versions: store metadata, which is the gate that refuses every other row.
func UnmarshalOpen(b []byte, v any) error {
	if err := openMode.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return nil
}

// Generic decodes b into plain Go values for display: maps become
// map[string]any, byte strings []byte, text strings string, integers
// uint64 or int64. It applies the same structural limits as Unmarshal.
func Generic(b []byte) (any, error) {
	var v any
	if err := anyMode.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return v, nil
}
