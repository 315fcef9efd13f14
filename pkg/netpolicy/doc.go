// Package netpolicy holds Lazaret's network records: the derived network
// policy that the network sidecar enforces, the decision procedure that
// explains it, and the readiness records that prove, before a generation is
// published, that the enforcement path behaves as the policy says.
//
// What belongs here:
//
//   - DerivedNetworkPolicy (schema lazaret-derived-network-policy-v1): its
//     strict Postcard encoding, canonical form and digest, and Derive, which
//     builds it from effective allow and deny prefix sets and the readiness
//     DNS resolvers.
//   - Decider and Decision: longest-prefix match with the DNS rule and the
//     structural always-drop set, as pure functions for `net explain`,
//     configuration checks and tests.
//   - The readiness records (attestation, identity, reachability probe and
//     evidence), the readiness fingerprint, and Bind and Verify, which the
//     Host Coordinator uses to accept a sidecar's attestation and probe for
//     one generation.
//
// What does not: loading configuration (pkg/config produces the effective
// prefix sets and readiness targets this package takes as plain values),
// nftables rule planning and installation, memfd sealing, and running the
// probes. Those consume these records; none of them is needed to test them.
//
// # Wire layout
//
// Every record is a Postcard struct with its fields in schema order. Enums
// are varint variant indices: AddressFamily IPv4=0, IPv6=1; Disposition
// Enabled=0, Disabled=1; PolicyAction Allow=0, Deny=1; PolicyDelivery
// SealedMemfd=0. In the derived policy a network or address is a union
// tagged by its own family (V4=0: four address bytes; V6=1: sixteen address
// bytes), a network then adds its prefix length as one u8; the union tag
// must equal the entry's family field. The readiness records are IPv4-only
// and carry a bare four-byte address, a destination as the address then the
// port as a u16 varint, and a route prefix as the address then a u8 length.
package netpolicy
