package postcard

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Marshaler is a record that writes itself field by field.
type Marshaler interface {
	MarshalPostcard(e *Encoder)
}

// Unmarshaler is a record that reads itself field by field.
type Unmarshaler interface {
	UnmarshalPostcard(d *Decoder)
}

// Marshal returns the minimal encoding of m.
func Marshal(m Marshaler) []byte {
	var e Encoder
	m.MarshalPostcard(&e)
	return e.Bytes()
}

// Unmarshal decodes b into u, requiring that b is exactly one minimal
// encoding with no trailing bytes.
func Unmarshal(b []byte, u Unmarshaler) error {
	d := NewDecoder(b)
	u.UnmarshalPostcard(d)
	return d.Finish()
}

// Errors reported by the decoder; test with errors.Is.
var (
	ErrTruncated    = errors.New("postcard: input ends inside a value")
	ErrOverlong     = errors.New("postcard: varint is not minimally encoded")
	ErrOverflow     = errors.New("postcard: value out of range for its type")
	ErrInvalidBool  = errors.New("postcard: bool byte is neither 0 nor 1")
	ErrInvalidTag   = errors.New("postcard: option tag is neither 0 nor 1")
	ErrUnknownEnum  = errors.New("postcard: unknown variant")
	ErrInvalidUTF8  = errors.New("postcard: string is not valid UTF-8")
	ErrTrailing     = errors.New("postcard: trailing bytes after value")
	ErrInvalidValue = errors.New("postcard: value violates its record's rules")
)

// Encoder appends minimal Postcard encodings to a buffer.
type Encoder struct {
	buf []byte
}

// NewEncoder returns an encoder whose buffer starts with capacity n.
func NewEncoder(n int) *Encoder { return &Encoder{buf: make([]byte, 0, n)} }

// Bytes returns the encoded bytes; the slice aliases the encoder's buffer.
func (e *Encoder) Bytes() []byte { return e.buf }

// Len is the number of bytes written so far.
func (e *Encoder) Len() int { return len(e.buf) }

func (e *Encoder) varint(v uint64) {
	for v >= 0x80 {
		e.buf = append(e.buf, byte(v)|0x80)
		v >>= 7
	}
	e.buf = append(e.buf, byte(v))
}

// U8 writes one raw byte.
func (e *Encoder) U8(v uint8) { e.buf = append(e.buf, v) }

// U16 writes a varint.
func (e *Encoder) U16(v uint16) { e.varint(uint64(v)) }

// U32 writes a varint.
func (e *Encoder) U32(v uint32) { e.varint(uint64(v)) }

// U64 writes a varint.
func (e *Encoder) U64(v uint64) { e.varint(v) }

// I32 writes a zigzag varint.
func (e *Encoder) I32(v int32) { e.varint(uint64(uint32((v << 1) ^ (v >> 31)))) }

// I64 writes a zigzag varint.
func (e *Encoder) I64(v int64) { e.varint(uint64((v << 1) ^ (v >> 63))) }

// Bool writes 0x00 or 0x01.
func (e *Encoder) Bool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// SeqLen writes a sequence, string or byte-string length.
func (e *Encoder) SeqLen(n int) { e.varint(uint64(n)) }

// ByteString writes a length-prefixed byte string.
func (e *Encoder) ByteString(b []byte) {
	e.SeqLen(len(b))
	e.buf = append(e.buf, b...)
}

// String writes a length-prefixed UTF-8 string. The caller guarantees that s
// is valid UTF-8 (records validate before encoding).
func (e *Encoder) String(s string) {
	e.SeqLen(len(s))
	e.buf = append(e.buf, s...)
}

// Fixed writes a fixed-size array of bytes with no length.
func (e *Encoder) Fixed(b []byte) { e.buf = append(e.buf, b...) }

// Variant writes an enum or union variant index.
func (e *Encoder) Variant(i uint32) { e.varint(uint64(i)) }

// None writes the option tag for an absent value.
func (e *Encoder) None() { e.buf = append(e.buf, 0) }

// Some writes the option tag for a present value; the value follows.
func (e *Encoder) Some() { e.buf = append(e.buf, 1) }

// Decoder reads strict minimal Postcard encodings. The first error is sticky:
// every later read returns a zero value, and Err or Finish reports the error
// with the byte offset where it happened.
type Decoder struct {
	data []byte
	off  int
	err  error
}

// NewDecoder returns a decoder over b; it does not copy b.
func NewDecoder(b []byte) *Decoder { return &Decoder{data: b} }

// Err returns the first error, if any.
func (d *Decoder) Err() error { return d.err }

// Offset is the number of bytes consumed so far.
func (d *Decoder) Offset() int { return d.off }

// Remaining is the number of unread bytes.
func (d *Decoder) Remaining() int { return len(d.data) - d.off }

// Finish reports the first error, or ErrTrailing if input remains.
func (d *Decoder) Finish() error {
	if d.err != nil {
		return d.err
	}
	if d.off != len(d.data) {
		return &DecodeError{Offset: d.off, Err: ErrTrailing}
	}
	return nil
}

// DecodeError is a decoding failure at a byte offset.
type DecodeError struct {
	Offset int
	Field  string
	Err    error
}

func (e *DecodeError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%v (field %s, at byte %d)", e.Err, e.Field, e.Offset)
	}
	return fmt.Sprintf("%v (at byte %d)", e.Err, e.Offset)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Fail records err at the current offset unless an error is already
// recorded. Record decoders call it for rule violations (ErrInvalidValue,
// ErrUnknownEnum) so that the offset and field are reported.
func (d *Decoder) Fail(field string, err error) {
	if d.err == nil {
		d.err = &DecodeError{Offset: d.off, Field: field, Err: err}
	}
}

func (d *Decoder) varint(max uint64, maxBytes int) uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	start := d.off
	for i := 0; ; i++ {
		if i == maxBytes {
			d.off = start
			d.Fail("", ErrOverflow)
			return 0
		}
		if d.off >= len(d.data) {
			d.Fail("", ErrTruncated)
			return 0
		}
		b := d.data[d.off]
		d.off++
		if i == 9 && b > 1 {
			d.off = start
			d.Fail("", ErrOverflow)
			return 0
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			if b == 0 && i > 0 {
				d.off = start
				d.Fail("", ErrOverlong)
				return 0
			}
			break
		}
	}
	if v > max {
		d.off = start
		d.Fail("", ErrOverflow)
		return 0
	}
	return v
}

// U8 reads one raw byte.
func (d *Decoder) U8() uint8 {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.data) {
		d.Fail("", ErrTruncated)
		return 0
	}
	v := d.data[d.off]
	d.off++
	return v
}

// U16 reads a varint of at most 3 bytes whose value fits 16 bits.
func (d *Decoder) U16() uint16 { return uint16(d.varint(1<<16-1, 3)) }

// U32 reads a varint of at most 5 bytes whose value fits 32 bits.
func (d *Decoder) U32() uint32 { return uint32(d.varint(1<<32-1, 5)) }

// U64 reads a varint of at most 10 bytes.
func (d *Decoder) U64() uint64 { return d.varint(1<<64-1, 10) }

// I32 reads a zigzag varint.
func (d *Decoder) I32() int32 {
	u := uint32(d.varint(1<<32-1, 5))
	return int32(u>>1) ^ -int32(u&1)
}

// I64 reads a zigzag varint.
func (d *Decoder) I64() int64 {
	u := d.varint(1<<64-1, 10)
	return int64(u>>1) ^ -int64(u&1)
}

// Bool reads a strict bool byte.
func (d *Decoder) Bool() bool {
	start := d.off
	b := d.U8()
	if d.err == nil && b > 1 {
		d.off = start
		d.Fail("", ErrInvalidBool)
	}
	return b == 1
}

// Option reads an option tag and reports whether a value follows.
func (d *Decoder) Option() bool {
	start := d.off
	b := d.U8()
	if d.err == nil && b > 1 {
		d.off = start
		d.Fail("", ErrInvalidTag)
	}
	return b == 1
}

// Variant reads an enum or union variant index and checks it is below n.
func (d *Decoder) Variant(n uint32) uint32 {
	start := d.off
	v := d.U32()
	if d.err == nil && v >= n {
		d.off = start
		d.Fail("", ErrUnknownEnum)
		return 0
	}
	return v
}

// SeqLen reads a length and checks that at least minElemSize*n bytes remain,
// so that a hostile length cannot make the caller allocate beyond the input.
// Pass minElemSize 1 for byte strings and for elements of at least one byte.
func (d *Decoder) SeqLen(minElemSize int) int {
	start := d.off
	n := d.varint(1<<32-1, 5)
	if d.err != nil {
		return 0
	}
	if minElemSize > 0 && n > uint64(d.Remaining()/minElemSize) {
		d.off = start
		d.Fail("", ErrTruncated)
		return 0
	}
	return int(n)
}

// ByteString reads a length-prefixed byte string into a new slice.
func (d *Decoder) ByteString() []byte {
	n := d.SeqLen(1)
	if d.err != nil {
		return nil
	}
	b := make([]byte, n)
	copy(b, d.data[d.off:d.off+n])
	d.off += n
	return b
}

// String reads a length-prefixed string and checks it is valid UTF-8.
func (d *Decoder) String() string {
	start := d.off
	n := d.SeqLen(1)
	if d.err != nil {
		return ""
	}
	s := d.data[d.off : d.off+n]
	if !utf8.Valid(s) {
		d.off = start
		d.Fail("", ErrInvalidUTF8)
		return ""
	}
	d.off += n
	return string(s)
}

// Fixed fills dst from the next len(dst) bytes.
func (d *Decoder) Fixed(dst []byte) {
	if d.err != nil {
		return
	}
	if d.Remaining() < len(dst) {
		d.Fail("", ErrTruncated)
		return
	}
	copy(dst, d.data[d.off:d.off+len(dst)])
	d.off += len(dst)
}
