// Package catalog is the Storage Catalog: the prepared image artifacts of a
// storage root, the per-generation leases on them, and the durable prepare
// operations that create them.
//
// Rules enforced by its transactions:
//
//   - A PrepareOperation is recorded in Intent, with no device or inode,
//     before its stage directory exists; the exact same operation moves to
//     Owned with both values; only an Owned operation publishes
//     (Tx.Publish, which creates the Available artifact and removes the
//     operation atomically) or is the basis of abandoned-stage recovery.
//   - A PreparedArtifact's fields are immutable; Available moves to
//     Reclaiming only while no lease names it, and only a Reclaiming,
//     unleased artifact is deleted, with an absence proof.
//   - An ArtifactLease identifies one (artifact, Domain, generation) and
//     exists at most once; only an Available artifact is leased.
//
// Leases name Domain Store generations, but the two stores are separate
// files and never one transaction; nothing here reads a Domain Store.
// Several Host Coordinators share the catalog, so it is opened for a short
// sequence of transactions and closed again.
package catalog
