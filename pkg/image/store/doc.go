// Package store keeps Lazaret's local image store: an OCI image layout
// directory under the storage root (`<storage root>/images`) that `image
// load` and `image pull` fill and that artifact preparation reads.
//
// Layout:
//
//	images/oci-layout          {"imageLayoutVersion":"1.0.0"}
//	images/index.json          one manifest descriptor per reference
//	images/blobs/sha256/<hex>  manifests, configs and layers, verified
//	images/lock                flock: shared for readers, exclusive for commits
//	images/tmp/<random>/       private staging of one load or pull
//
// Each index.json descriptor carries the full normalized reference in
// org.opencontainers.image.ref.name and the digest its source named
// (an index digest for a multi-platform pull) in
// dev.lazaret.image.source-digest. Only single-platform image manifests
// are stored; a multi-platform source is resolved to one platform when it
// enters the store.
//
// Writers stage blobs without the lock, verifying every digest and size,
// then take the exclusive lock only to move blobs into place and rewrite
// index.json atomically. Directories are 0700 and files 0600.
//
// Manifest parsing and archive reading come from
// github.com/google/go-containerregistry; this package adds the store's
// layout, locking, verification and naming rules.
//
// What does not belong here: fetching from a registry (image/registry,
// which stores through PutFetched: the registry and HTTP clients stay out
// of the Host Coordinator, which reads the store at every start), applying
// layers (image/unpack) and prepared artifacts (image/prepare).
package store
