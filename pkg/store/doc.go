// Package store holds the bbolt mechanics shared by Lazaret's two durable
// stores: the Domain Store (package domainstore, one file per Domain at
// <storage root>/domains/<domain id hex>.db) and the Storage Catalog
// (package catalog, <storage root>/catalog.db). Records, their encodings'
// field lists and their transition rules live in those packages; the
// deterministic CBOR codec lives in store/codec. This package holds no
// record type except StoreMetadata.
//
// # Opening
//
// Every store file carries a "metadata" bucket holding one StoreMetadata
// record (schema_id, schema_version). Open refuses, before any other row
// is read and without changing a byte of the file:
//
//   - a missing file, unless Create was asked for;
//   - an empty, truncated or foreign file: the two bbolt meta pages are
//     parsed by this package itself (magic, format version, FNV-1a
//     checksum, page size, and the high-water page count against the file
//     size), because bbolt would initialise an empty file and may read past
//     the end of a short one (*DamageError);
//   - unversioned, unreadable, unknown-schema, older and newer metadata
//     (*SchemaError naming the file and both versions);
//   - a file that fails bbolt's page-level check (*DamageError).
//
// The last two checks run in a child process. bbolt trusts its pages: a
// damaged page makes it panic, sometimes in a goroutine the caller cannot
// recover, and a short mapping makes it fault. The child is the running
// executable re-executed with argv[0] "lazaret-store-check" and
// LAZARET_STORE_CHECK=v1; this package's init function recognises that
// pair, runs the read-only check, prints a JSON report and exits, so every
// binary that links the package can check stores without a change to its
// main. A checker that crashes, or overruns its timeout, reports damage.
// Only after the child passes the file is opened for use (read-write unless
// ReadOnly, with a timeout on bbolt's file lock) and the metadata is
// compared once more under the lock. A process does not run the child
// again for a file that nothing has written since it was checked or since
// this process closed it after its own transactions (verified.go).
//
// A damaged store is never reinitialised or repaired. It is reported, and
// moved aside by Quarantine only on explicit request; a schema mismatch is
// not damage and is never moved aside.
//
// # Creating
//
// Create writes a complete new store (metadata and the caller's initial
// rows, one transaction) under a temporary name in the target directory
// and renames it into place with RENAME_NOREPLACE, so a crash leaves no
// store or a complete one. Directories are created 0700 and files 0600.
//
// # Writing
//
// DB.Update is a bbolt read-write transaction committed with fsync; an
// error returned from it rolls back every write made in it. The record
// packages check each write against the recorded row inside that
// transaction and return a *RecordError, whose class (ErrIllegalTransition,
// ErrEvidenceChanged, ErrMissingEvidence, ErrAbsenceProofRequired,
// ErrInvalidRecord, ErrReferenceMismatch, ErrNotFound, ErrExists) works
// with errors.Is.
package store
