// Package hostid defines the exact host identities that Lazaret records as
// evidence (pidfs process identities, namespace identities and mount
// identities), captures them live from the kernel, and carries the
// staged/committed process-ownership barrier. Encodings: Postcard for claims
// and messages, deterministic CBOR for store values.
//
// Only a PidfsProcessAuthorityV1 (boot ID, pidfs device and inode) is positive
// authority over a process. The host PID and start time of a
// PidfsProcessIdentityV1 are negative evidence: they can show that a process
// is not the recorded one, never that it is.
package hostid
