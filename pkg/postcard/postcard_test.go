package postcard

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Wire rules these vectors check, in short:
//   - unsigned integers wider than a byte are LEB128: the low seven bits
//     first, the top bit of each byte says another byte follows;
//   - signed integers are first mapped by zigzag (0,-1,1,-2,... become
//     0,1,2,3,...) and then written as the unsigned varint of their width;
//   - a varint of width w has at most ceil(w/7) bytes and no trailing zero
//     group (that would be a second, longer spelling of the same value);
//   - bool and Option tags are exactly one byte, 0 or 1;
//   - enum variants are u32 varints; lengths are varints before the bytes;
//   - fixed arrays are raw bytes.

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

type vector struct {
	name   string
	hex    string
	encode func(e *Encoder)
	decode func(d *Decoder) any // returns the decoded value
	want   any
}

func vectors() []vector {
	u16 := func(v uint16) (func(*Encoder), func(*Decoder) any, any) {
		return func(e *Encoder) { e.U16(v) }, func(d *Decoder) any { return d.U16() }, v
	}
	u32 := func(v uint32) (func(*Encoder), func(*Decoder) any, any) {
		return func(e *Encoder) { e.U32(v) }, func(d *Decoder) any { return d.U32() }, v
	}
	u64 := func(v uint64) (func(*Encoder), func(*Decoder) any, any) {
		return func(e *Encoder) { e.U64(v) }, func(d *Decoder) any { return d.U64() }, v
	}
	i32 := func(v int32) (func(*Encoder), func(*Decoder) any, any) {
		return func(e *Encoder) { e.I32(v) }, func(d *Decoder) any { return d.I32() }, v
	}
	i64 := func(v int64) (func(*Encoder), func(*Decoder) any, any) {
		return func(e *Encoder) { e.I64(v) }, func(d *Decoder) any { return d.I64() }, v
	}
	mk := func(name, h string, f func(*Encoder), g func(*Decoder) any, want any) vector {
		return vector{name, h, f, g, want}
	}
	var vs []vector
	add := func(name, h string, fgw func() (func(*Encoder), func(*Decoder) any, any)) {
		f, g, w := fgw()
		vs = append(vs, mk(name, h, f, g, w))
	}
	add("u8 0", "00", func() (func(*Encoder), func(*Decoder) any, any) {
		return func(e *Encoder) { e.U8(0) }, func(d *Decoder) any { return d.U8() }, uint8(0)
	})
	add("u8 max", "ff", func() (func(*Encoder), func(*Decoder) any, any) {
		return func(e *Encoder) { e.U8(255) }, func(d *Decoder) any { return d.U8() }, uint8(255)
	})
	// One byte holds 0..127; 128 needs a continuation byte.
	add("u16 0", "00", func() (func(*Encoder), func(*Decoder) any, any) { return u16(0) })
	add("u16 127", "7f", func() (func(*Encoder), func(*Decoder) any, any) { return u16(127) })
	add("u16 128", "80 01", func() (func(*Encoder), func(*Decoder) any, any) { return u16(128) })
	add("u16 16383", "ff 7f", func() (func(*Encoder), func(*Decoder) any, any) { return u16(16383) })
	add("u16 16384", "80 80 01", func() (func(*Encoder), func(*Decoder) any, any) { return u16(16384) })
	add("u16 max", "ff ff 03", func() (func(*Encoder), func(*Decoder) any, any) { return u16(math.MaxUint16) })
	add("u32 0", "00", func() (func(*Encoder), func(*Decoder) any, any) { return u32(0) })
	add("u32 300", "ac 02", func() (func(*Encoder), func(*Decoder) any, any) { return u32(300) })
	add("u32 16384", "80 80 01", func() (func(*Encoder), func(*Decoder) any, any) { return u32(16384) })
	add("u32 max", "ff ff ff ff 0f", func() (func(*Encoder), func(*Decoder) any, any) { return u32(math.MaxUint32) })
	add("u64 127", "7f", func() (func(*Encoder), func(*Decoder) any, any) { return u64(127) })
	add("u64 128", "80 01", func() (func(*Encoder), func(*Decoder) any, any) { return u64(128) })
	add("u64 2^32", "80 80 80 80 10", func() (func(*Encoder), func(*Decoder) any, any) { return u64(1 << 32) })
	add("u64 max", "ff ff ff ff ff ff ff ff ff 01", func() (func(*Encoder), func(*Decoder) any, any) { return u64(math.MaxUint64) })
	// Zigzag: 0→0, -1→1, 1→2, -2→3; min→max unsigned, max→max-1.
	add("i32 0", "00", func() (func(*Encoder), func(*Decoder) any, any) { return i32(0) })
	add("i32 -1", "01", func() (func(*Encoder), func(*Decoder) any, any) { return i32(-1) })
	add("i32 1", "02", func() (func(*Encoder), func(*Decoder) any, any) { return i32(1) })
	add("i32 -2", "03", func() (func(*Encoder), func(*Decoder) any, any) { return i32(-2) })
	add("i32 -64", "7f", func() (func(*Encoder), func(*Decoder) any, any) { return i32(-64) })
	add("i32 64", "80 01", func() (func(*Encoder), func(*Decoder) any, any) { return i32(64) })
	add("i32 min", "ff ff ff ff 0f", func() (func(*Encoder), func(*Decoder) any, any) { return i32(math.MinInt32) })
	add("i32 max", "fe ff ff ff 0f", func() (func(*Encoder), func(*Decoder) any, any) { return i32(math.MaxInt32) })
	add("i64 -1", "01", func() (func(*Encoder), func(*Decoder) any, any) { return i64(-1) })
	add("i64 1", "02", func() (func(*Encoder), func(*Decoder) any, any) { return i64(1) })
	add("i64 min", "ff ff ff ff ff ff ff ff ff 01", func() (func(*Encoder), func(*Decoder) any, any) { return i64(math.MinInt64) })
	add("i64 max", "fe ff ff ff ff ff ff ff ff 01", func() (func(*Encoder), func(*Decoder) any, any) { return i64(math.MaxInt64) })
	vs = append(vs,
		mk("bool false", "00", func(e *Encoder) { e.Bool(false) }, func(d *Decoder) any { return d.Bool() }, false),
		mk("bool true", "01", func(e *Encoder) { e.Bool(true) }, func(d *Decoder) any { return d.Bool() }, true),
		mk("option none", "00", func(e *Encoder) { e.None() }, func(d *Decoder) any { return d.Option() }, false),
		mk("option some u8", "01 05", func(e *Encoder) { e.Some(); e.U8(5) },
			func(d *Decoder) any {
				if !d.Option() {
					return nil
				}
				return d.U8()
			}, uint8(5)),
		mk("variant 3", "03", func(e *Encoder) { e.Variant(3) }, func(d *Decoder) any { return d.Variant(4) }, uint32(3)),
		mk("variant 200", "c8 01", func(e *Encoder) { e.Variant(200) }, func(d *Decoder) any { return d.Variant(201) }, uint32(200)),
		mk("string empty", "00", func(e *Encoder) { e.String("") }, func(d *Decoder) any { return d.String() }, ""),
		mk("string utf8", "06 68 c3 a9 6c 6c 6f", func(e *Encoder) { e.String("héllo") }, func(d *Decoder) any { return d.String() }, "héllo"),
		mk("bytes", "03 01 02 03", func(e *Encoder) { e.ByteString([]byte{1, 2, 3}) }, func(d *Decoder) any { return string(d.ByteString()) }, "\x01\x02\x03"),
		mk("bytes empty", "00", func(e *Encoder) { e.ByteString(nil) }, func(d *Decoder) any { return len(d.ByteString()) }, 0),
		mk("fixed", "aa bb", func(e *Encoder) { e.Fixed([]byte{0xaa, 0xbb}) },
			func(d *Decoder) any {
				var b [2]byte
				d.Fixed(b[:])
				return b
			}, [2]byte{0xaa, 0xbb}),
		mk("seq len 128", "80 01", func(e *Encoder) { e.SeqLen(128) }, func(d *Decoder) any { return d.SeqLen(0) }, 128),
	)
	return vs
}

func TestGoldenVectors(t *testing.T) {
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			want := unhex(t, v.hex)
			var e Encoder
			v.encode(&e)
			if !bytes.Equal(e.Bytes(), want) {
				t.Fatalf("encode = % x, want % x", e.Bytes(), want)
			}
			d := NewDecoder(want)
			got := v.decode(d)
			if err := d.Finish(); err != nil {
				t.Fatalf("decode % x: %v", want, err)
			}
			if got != v.want {
				t.Fatalf("decode % x = %v (%T), want %v (%T)", want, got, got, v.want, v.want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	type op func(d *Decoder)
	u16 := func(d *Decoder) { d.U16() }
	u32 := func(d *Decoder) { d.U32() }
	u64 := func(d *Decoder) { d.U64() }
	i32 := func(d *Decoder) { d.I32() }
	i64 := func(d *Decoder) { d.I64() }
	tests := []struct {
		name   string
		hex    string
		op     op
		want   error
		offset int
	}{
		{"empty input", "", func(d *Decoder) { d.U8() }, ErrTruncated, 0},
		{"overlong zero", "80 00", u32, ErrOverlong, 0},
		{"overlong 127", "ff 00", u32, ErrOverlong, 0},
		{"overlong u16", "80 80 00", u16, ErrOverlong, 0},
		{"overlong u64 five bytes", "80 80 80 80 00", u64, ErrOverlong, 0},
		{"overlong i32", "81 00", i32, ErrOverlong, 0},
		{"u16 value above max", "80 80 04", u16, ErrOverflow, 0},
		{"u16 too many bytes", "80 80 80 01", u16, ErrOverflow, 0},
		{"u32 value above max", "ff ff ff ff 10", u32, ErrOverflow, 0},
		{"u32 too many bytes", "80 80 80 80 80 01", u32, ErrOverflow, 0},
		{"i32 value above max", "ff ff ff ff 1f", i32, ErrOverflow, 0},
		{"u64 tenth byte 2", "ff ff ff ff ff ff ff ff ff 02", u64, ErrOverflow, 0},
		{"u64 tenth byte continues", "ff ff ff ff ff ff ff ff ff 81 01", u64, ErrOverflow, 0},
		{"u64 eleven bytes", "80 80 80 80 80 80 80 80 80 80 01", u64, ErrOverflow, 0},
		{"i64 tenth byte 2", "ff ff ff ff ff ff ff ff ff 02", i64, ErrOverflow, 0},
		{"varint truncated", "80", u64, ErrTruncated, 1},
		{"bool 2", "02", func(d *Decoder) { d.Bool() }, ErrInvalidBool, 0},
		{"bool ff", "ff", func(d *Decoder) { d.Bool() }, ErrInvalidBool, 0},
		{"option tag 2", "02", func(d *Decoder) { d.Option() }, ErrInvalidTag, 0},
		{"unknown variant", "03", func(d *Decoder) { d.Variant(3) }, ErrUnknownEnum, 0},
		{"unknown variant large", "80 80 80 80 08", func(d *Decoder) { d.Variant(3) }, ErrUnknownEnum, 0},
		{"overlong variant", "80 00", func(d *Decoder) { d.Variant(3) }, ErrOverlong, 0},
		{"invalid utf8", "02 c3 28", func(d *Decoder) { _ = d.String() }, ErrInvalidUTF8, 0},
		{"utf8 surrogate", "03 ed a0 80", func(d *Decoder) { _ = d.String() }, ErrInvalidUTF8, 0},
		{"string truncated", "05 61", func(d *Decoder) { _ = d.String() }, ErrTruncated, 0},
		{"trailing bytes", "00 00", func(d *Decoder) { d.U8() }, ErrTrailing, 1},
		{"hostile byte-string length", "ff ff ff ff 0f 00", func(d *Decoder) { d.ByteString() }, ErrTruncated, 0},
		{"length above u32", "80 80 80 80 10", func(d *Decoder) { d.ByteString() }, ErrOverflow, 0},
		{"hostile sequence length", "02" + strings.Repeat("00", 16), func(d *Decoder) { d.SeqLen(16) }, ErrTruncated, 0},
		{"fixed truncated", "01 02", func(d *Decoder) {
			var b [3]byte
			d.Fixed(b[:])
		}, ErrTruncated, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(unhex(t, tt.hex))
			tt.op(d)
			err := d.Finish()
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset != tt.offset {
				t.Fatalf("error %v: want *DecodeError at offset %d", err, tt.offset)
			}
		})
	}
}

func TestStickyError(t *testing.T) {
	d := NewDecoder(unhex(t, "02 05 01"))
	if d.Bool() {
		t.Fatal("invalid bool read as true")
	}
	first := d.Err()
	if !errors.Is(first, ErrInvalidBool) {
		t.Fatalf("Err = %v", first)
	}
	if v := d.U8(); v != 0 {
		t.Fatalf("read after error = %d, want 0", v)
	}
	if s := d.String(); s != "" {
		t.Fatalf("string after error = %q", s)
	}
	d.Fail("other", ErrInvalidValue)
	if d.Err() != first || !errors.Is(d.Finish(), ErrInvalidBool) {
		t.Fatalf("first error not kept: %v", d.Err())
	}
}

func TestDecodeErrorNamesField(t *testing.T) {
	d := NewDecoder([]byte{1, 2})
	d.U8()
	d.Fail("request_id", ErrInvalidValue)
	err := d.Finish()
	if got := err.Error(); got != "postcard: value violates its record's rules (field request_id, at byte 1)" {
		t.Fatalf("Error() = %q", got)
	}
	if !errors.Is(err, ErrInvalidValue) {
		t.Fatal("errors.Is(ErrInvalidValue) = false")
	}
}

// pair is a small record for Marshal/Unmarshal.
type pair struct {
	a uint32
	b string
}

func (p *pair) MarshalPostcard(e *Encoder) { e.U32(p.a); e.String(p.b) }
func (p *pair) UnmarshalPostcard(d *Decoder) {
	p.a = d.U32()
	p.b = d.String()
}

func TestMarshalUnmarshal(t *testing.T) {
	in := pair{a: 300, b: "ok"}
	b := Marshal(&in)
	if want := unhex(t, "ac 02 02 6f 6b"); !bytes.Equal(b, want) {
		t.Fatalf("Marshal = % x, want % x", b, want)
	}
	var out pair
	if err := Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("Unmarshal = %+v, %v", out, err)
	}
	if err := Unmarshal(append(b, 0), &out); !errors.Is(err, ErrTrailing) {
		t.Fatalf("trailing byte: %v", err)
	}
	if err := Unmarshal(b[:3], &out); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	e := NewEncoder(8)
	e.U8(1)
	if e.Len() != 1 {
		t.Fatalf("Len = %d", e.Len())
	}
}

// Every u16 round-trips, and the encoded length is the minimal one.
func TestU16Exhaustive(t *testing.T) {
	for v := 0; v <= math.MaxUint16; v++ {
		var e Encoder
		e.U16(uint16(v))
		want := 1
		if v >= 1<<7 {
			want = 2
		}
		if v >= 1<<14 {
			want = 3
		}
		if e.Len() != want {
			t.Fatalf("u16 %d encodes to %d bytes, want %d", v, e.Len(), want)
		}
		d := NewDecoder(e.Bytes())
		if got := d.U16(); got != uint16(v) || d.Finish() != nil {
			t.Fatalf("u16 %d decodes to %d, %v", v, got, d.Finish())
		}
	}
}

// Decoding is canonical: every input of up to three bytes that decodes as a
// u32 re-encodes to exactly the same bytes.
func TestU32Canonical(t *testing.T) {
	buf := make([]byte, 0, 3)
	accepted := 0
	for n := 1; n <= 3; n++ {
		limit := 1 << (8 * n)
		for x := 0; x < limit; x++ {
			buf = buf[:0]
			for i := 0; i < n; i++ {
				buf = append(buf, byte(x>>(8*i)))
			}
			d := NewDecoder(buf)
			v := d.U32()
			if d.Finish() != nil {
				continue
			}
			accepted++
			var e Encoder
			e.U32(v)
			if !bytes.Equal(e.Bytes(), buf) {
				t.Fatalf("% x decodes to %d which encodes to % x", buf, v, e.Bytes())
			}
		}
	}
	// Exactly the values below 2^21 have a canonical form of 1 to 3 bytes.
	if accepted != 1<<21 {
		t.Fatalf("accepted %d encodings, want %d", accepted, 1<<21)
	}
}

func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		// Spread values over every length class.
		u := r.Uint64() >> r.IntN(64)
		s := int64(u)
		if r.IntN(2) == 0 {
			s = -s
		}
		var e Encoder
		e.U64(u)
		e.U32(uint32(u))
		e.U16(uint16(u))
		e.I64(s)
		e.I32(int32(s))
		e.Bool(u&1 == 1)
		e.String(strings.Repeat("é", int(u%7)))
		e.ByteString(bytes.Repeat([]byte{byte(u)}, int(u%300)))
		d := NewDecoder(e.Bytes())
		if d.U64() != u || d.U32() != uint32(u) || d.U16() != uint16(u) || d.I64() != s ||
			d.I32() != int32(s) || d.Bool() != (u&1 == 1) || d.String() != strings.Repeat("é", int(u%7)) ||
			!bytes.Equal(d.ByteString(), bytes.Repeat([]byte{byte(u)}, int(u%300))) {
			t.Fatalf("round trip of %d / %d failed", u, s)
		}
		if err := d.Finish(); err != nil {
			t.Fatalf("round trip of %d: %v", u, err)
		}
	}
}

// scalarOps are the decoders the scalar fuzz target exercises, with the
// encoder that must reproduce the input.
var scalarOps = []func(d *Decoder, e *Encoder){
	func(d *Decoder, e *Encoder) { e.U8(d.U8()) },
	func(d *Decoder, e *Encoder) { e.U16(d.U16()) },
	func(d *Decoder, e *Encoder) { e.U32(d.U32()) },
	func(d *Decoder, e *Encoder) { e.U64(d.U64()) },
	func(d *Decoder, e *Encoder) { e.I32(d.I32()) },
	func(d *Decoder, e *Encoder) { e.I64(d.I64()) },
	func(d *Decoder, e *Encoder) { e.Bool(d.Bool()) },
	func(d *Decoder, e *Encoder) {
		if d.Option() {
			e.Some()
			e.U32(d.U32())
		} else {
			e.None()
		}
	},
	func(d *Decoder, e *Encoder) { e.Variant(d.Variant(5)) },
	func(d *Decoder, e *Encoder) { e.String(d.String()) },
	func(d *Decoder, e *Encoder) { e.ByteString(d.ByteString()) },
}

// FuzzDecodeScalar decodes one value of the type data[0] selects and
// checks that whatever decodes re-encodes to the same bytes.
func FuzzDecodeScalar(f *testing.F) {
	for _, v := range vectors() {
		f.Add(append([]byte{0}, unhex(f, v.hex)...))
	}
	f.Add([]byte{3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{9, 0x02, 0xc3, 0xa9})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		op := scalarOps[int(data[0])%len(scalarOps)]
		in := data[1:]
		d := NewDecoder(in)
		var e Encoder
		op(d, &e)
		if d.Finish() != nil {
			return
		}
		if !bytes.Equal(e.Bytes(), in) {
			t.Fatalf("op %d: % x decoded and re-encoded to % x", data[0]%byte(len(scalarOps)), in, e.Bytes())
		}
	})
}

// FuzzDecodeSequence decodes a sequence of strings with a hostile length
// and checks canonical re-encoding.
func FuzzDecodeSequence(f *testing.F) {
	f.Add([]byte{0x02, 0x01, 'a', 0x00})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(data)
		n := d.SeqLen(1)
		var out []string
		for i := 0; i < n && d.Err() == nil; i++ {
			out = append(out, d.String())
		}
		if d.Finish() != nil {
			return
		}
		var e Encoder
		e.SeqLen(len(out))
		for _, s := range out {
			e.String(s)
		}
		if !bytes.Equal(e.Bytes(), data) {
			t.Fatalf("% x re-encoded to % x", data, e.Bytes())
		}
	})
}
