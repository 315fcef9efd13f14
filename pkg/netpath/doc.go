// Package netpath builds and checks a generation's enforcement path: the
// enforcement network namespace that holds the nftables ruleset, the
// sandbox network namespace joined to it by a veth pair, and the probes
// that prove from the sandbox side that the path behaves as the policy
// says.
//
// What belongs here: the executor that takes an nftplan.Plan and installs
// it in one batch and reads it back (Install, VerifyRuleset), the
// namespace, link, address, route and sysctl steps (Build), the wait for
// the connectivity helper's upstream interface (WaitUpstream), and the
// readiness probes (Path.Probe) with their minimal DNS client and the
// executor of their temporary probe rules (InstallProbeRules,
// RemoveProbeRules).
//
// # Readiness proof
//
// Path.Probe proves each target by an observation, never by a timeout: a
// denied target by the counter of its probe rule in the deny chain (the
// probe's SYN reached the deny verdict and was reset) with no completed
// handshake; a permitted target by a completed handshake or a reset from
// a host behind the path; a DNS target by an answer with the query's ID
// and question. The probe rules are inserted in one batch before any
// denied probe sends, read back and deleted in one batch after the last
// one ends, and VerifyRuleset must then find exactly the plan again.
//
// What does not: planning the ruleset (pkg/nftplan), the policy and
// readiness records (pkg/netpolicy), starting the connectivity helper or
// the sidecar process (their launchers), and the wire protocol between the
// sidecar and its parent (pkg/netsidecar).
//
// # Namespaces and threads
//
// A Go process cannot move all its threads into another network namespace.
// This package works on namespace file descriptors instead: netlink and
// nftables sockets are opened inside a namespace by a thread that enters
// it for the socket() call only (the socket stays bound to the namespace it
// was created in), and a sysctl is written by a locked thread that enters
// the namespace, writes, and returns. A thread that cannot return to its
// original namespace stays locked, so the runtime discards it.
//
// # Who holds what
//
// The enforcement namespace is the caller's (normally the sidecar's own
// network namespace); the sandbox namespace is created here and held by
// the *Path's descriptor. Both die with their last holder: when the
// sidecar exits, the enforcement namespace and its veth end go away, the
// sandbox namespace loses its only route, and no packet leaves. Nothing is
// mounted and nothing is created in the caller's host namespaces.
package netpath
