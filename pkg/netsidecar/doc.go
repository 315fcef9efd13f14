// Package netsidecar is the contract between lazaret-netsidecar and the
// process that starts it: the Postcard messages on the sidecar's control
// channel (a SOCK_SEQPACKET socket at fd 3), the sealed memfd that carries
// the derived policy (fd 4), and the parent's side of the exchange.
//
// The exchange, one message per packet:
//
//	parent  → sidecar  Start          identities, policy digest, host addresses, upstream, targets
//	sidecar → parent   Installed      ruleset installed and read back; namespaces; sandbox netns path
//	parent  → sidecar  HelperStarted  the connectivity helper's identity, after starting it
//	sidecar → parent   Ready          the readiness attestation and reachability probe
//
// Either side may instead send Failed with one sentence and stop. The
// sidecar then holds the namespaces until its channel closes or it is
// killed; with it they end, and the sandbox is left without a route.
//
// What does not belong here: the enforcement itself (pkg/netpath), the
// ruleset (pkg/nftplan), and accepting the evidence (netpolicy.Bind).
package netsidecar
