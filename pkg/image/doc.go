// Package image is the root of Lazaret's image handling. It holds no code of
// its own; the work is split by concept:
//
//   - image/store keeps the local OCI image store under the storage root
//     (load, pull, list, remove, prune).
//   - image/unpack applies image layers into a directory under a fixed,
//     versioned safety policy.
//   - image/idmap describes the user-namespace ID map that ownership is
//     translated through, and its canonical digest.
//   - image/prepare turns a stored image into a prepared artifact owned by
//     the Storage Catalog, following the catalog's Intent, Owned, Available
//     protocol, and manages leases and reclaim.
//   - image/build writes small OCI images from directory trees, for tests
//     and for images the project makes itself.
//
// docs/IMAGES.md describes the store layout, the unpack policy and the
// prepare protocol for users.
package image
