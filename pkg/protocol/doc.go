// Package protocol holds Lazaret's control and mailbox protocol: the Postcard
// records of the session terminal protocol and of protocol cryptography, the
// Ed25519 signatures over them, the generation TLS certificate authority, and
// the verifiers a receiver runs before it acts on a record.
//
// What belongs here: record types with their strict Postcard encodings, IDs
// and digests, signing and verification, TLS configuration for the control
// socket, and the replay guard. What does not: transport framing (the control
// socket's CBOR frames), file handling of the mailbox directory, and any
// decision about what an approved command may do.
//
// # Records
//
// Every record implements postcard.Marshaler and postcard.Unmarshaler with its
// fields in the schema's order. protocol_version is not a Go field: every v1
// record writes the constant Version and every decoder refuses any other
// value. Use Encode and Decode; Encode validates before it writes, and Decode
// accepts only the one minimal encoding of a valid record, so that
// Encode(Decode(b)) == b.
//
// Unions are a Kind plus one pointer per payload type; exactly the pointer
// that Kind selects is set. Options are pointers (nil is None) or, where the
// present value can never be empty, an empty slice.
//
// # Signatures
//
// Protocol signatures are Ed25519. The signature input of a record is
//
//	"lazaret/v1/" || name || u64be(len(payload)) || payload
//
// where name is the record's lower-kebab name (see RecordKind.Name and the
// Signature* constants) and payload is the exact signed bytes. A mailbox
// record travels as a SignedProtocolRecord that carries those payload bytes;
// receivers verify the signature over the carried bytes and only then decode
// them. Because every payload is shorter than 2^56 bytes, the first length
// byte is 0x00, so the name "mailbox-result" cannot be confused with
// "mailbox-result-ack" or "mailbox-result-chunk" (whose next byte is '-').
//
// Private keys are held in PrivateKey, whose String, Format, GoString and
// LogValue all redact the key; it never appears in logs or error text.
package protocol
