// Package isolation is sticky isolation of the workspace view: the set of
// host paths an earlier generation routed to the isolated root, the
// classifier that keeps them there, and the two files that carry the set
// between the coordinator and lazaret-gitroute (the keep file it reads at
// start, the report it writes after classification).
//
// It holds no I/O beyond encoding and decoding those files: the daemon
// reads and writes them, the coordinator keeps the set in the Domain
// Store (package domainstore's IsolatedPaths record).
package isolation
