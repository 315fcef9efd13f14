// Package readyprobe holds the parts of the network readiness proof that
// need no privilege and no Lazaret record: classifying a TCP connect, and
// asking a resolver for a name's A records. The host's enforcement path
// (pkg/netpath) runs them inside the sandbox's network namespace; the
// in-pod prober of a rendered Kubernetes Sandbox (`lazaret-guest
// readiness`, see Check) runs them in the pod's own.
//
// It imports only the standard library and golang.org/x/net's DNS
// message package, so that lazaret-guest, which must stay small, can
// link it.
package readyprobe
