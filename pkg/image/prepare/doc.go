// Package prepare turns a stored image into a prepared artifact (the
// unpacked tree a State Anchor mounts as its overlay lower layer) under the
// Storage Catalog's protocol, and manages artifact leases and reclaim.
//
// An artifact is identified by four SHA-256 digests: source_identity (the
// digest the image's source named: an index digest for a multi-platform
// pull, else the manifest digest), selected_manifest_digest,
// policy_id (SHA-256 of unpack.PolicyID) and id_map_digest (idmap's
// canonical encoding). Its prepared_artifact_id is SHA-256 of
//
//	"lazaret-prepared-artifact-v1" 0x00 source manifest policy idmap
//
// (four raw 32-byte digests), so every preparer of the same image for the
// same map computes the same ID, and the catalog admits one artifact.
//
// Files live under <storage root>/artifacts: the artifact at <id hex>, a
// stage at stage-<operation id hex>, and beside each stage a lock file
// held for the preparation's lifetime, which tells recovery a live
// preparation from an abandoned one.
//
// Protocol, in order: the PrepareOperation is committed in Intent with no
// device or inode; the stage directory is created and opened; the same
// operation is committed Owned with the stage's device and inode; the
// layers are applied into the open stage; its identity is re-checked; then
// one catalog transaction either renames the stage to the artifact path
// and publishes it (Tx.Publish: artifact Available, operation removed) or,
// when another preparer published first, leaves it, and the stage is
// removed and the operation deleted with that proof.
//
// What does not belong here: reading images (image/store), applying layers
// (image/unpack), and the catalog's records and transition rules (catalog).
package prepare
