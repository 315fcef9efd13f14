// Package postcard is a strict encoder and decoder for the Postcard wire
// format, which Lazaret uses for every signed claim, digest preimage and
// mailbox record.
//
// The wire rules, as published by the Postcard format specification:
//
//   - u8 and i8 are one raw byte.
//   - u16, u32, u64 (and usize) are unsigned LEB128 varints: seven value bits
//     per byte, least significant group first, the high bit set on every byte
//     but the last. A u16 takes at most 3 bytes, a u32 at most 5, a u64 at
//     most 10.
//   - i16, i32, i64 are zigzag-mapped ((n << 1) ^ (n >> bits-1)) and then
//     written as the unsigned varint of the same width.
//   - bool is one byte, 0x00 or 0x01.
//   - Option is a one-byte tag, 0x00 for None and 0x01 for Some followed by
//     the value.
//   - An enum or union is its variant index as a u32 varint, then the
//     variant's payload (nothing for a unit variant).
//   - A sequence, string or byte string is its length as a usize varint, then
//     its elements; strings are UTF-8.
//   - A fixed-size array (such as a 32-byte digest) and a struct are their
//     elements or fields in declared order with no length or tag.
//
// The encoder always writes the minimal form. The decoder accepts only the
// minimal form: an overlong varint, a value out of range for its width, a bool
// or option tag other than 0 or 1, an unknown variant, invalid UTF-8 and
// trailing bytes are all errors. Hence decode(encode(v)) == v and
// encode(decode(b)) == b for every b that decodes.
//
// Records implement Marshaler and Unmarshaler by hand, field by field in the
// schema's order; this package holds no reflection.
package postcard
