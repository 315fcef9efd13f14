// Package codec is the deterministic CBOR encoding of every value that
// Lazaret keeps in a bbolt store.
//
// Encoding uses the RFC 8949 core deterministic rules (shortest integers,
// definite lengths, map keys sorted bytewise). Records are CBOR maps keyed by
// their schema field names (`cbor:"field_name"`); optional fields are
// omitted when absent; enumerations are their variant names as text strings;
// Go strings are text strings and must be valid UTF-8.
//
// Decoding is closed: unknown map keys, duplicate map keys, indefinite
// lengths, tags and trailing bytes are errors. Because the library fills a
// fixed-size byte array from a shorter or longer byte string without
// complaint, Unmarshal also re-encodes the decoded value and requires the
// result to equal the input byte for byte. That single rule rejects every
// non-canonical form at once: wrong-length identifiers, explicit nulls for
// absent optional fields, non-minimal integers and unsorted keys.
//
// The package holds no bbolt code so that identity packages (hostid) can give
// their values a storage encoding without depending on the store.
package codec
