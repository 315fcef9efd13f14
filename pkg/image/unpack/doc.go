// Package unpack applies OCI image layers, in order, into a directory that
// becomes a prepared artifact. It owns the unpack policy: which tar entries
// are accepted, how whiteouts and opaque directories remove lower content,
// how ownership is translated through the sandbox's ID map, and which modes,
// extended attributes and times survive. The policy is versioned by PolicyID;
// any change to what Apply writes for the same input must change PolicyID,
// because prepared artifacts are keyed by it.
//
// Every path is resolved inside the target with openat2: parent directories
// with RESOLVE_IN_ROOT (symbolic links inside the image resolve against the
// image root, never the host's), the last component through the parent's
// descriptor without following it. Nothing here re-walks a path string from
// the host root.
//
// What does not belong here: fetching or verifying blobs (image/store and
// image/prepare hand in verified, decompressed tar streams) and the Storage
// Catalog protocol (image/prepare).
package unpack
