// Package nftplan turns a derived network policy into the nftables ruleset
// of a generation's enforcement namespace, as a closed list of operations.
//
// What belongs here: the pure planner (Plan), the longest-prefix
// flattening that lets one interval-set lookup decide a destination
// (Flatten), the operation types an executor accepts, Queue, which writes
// a plan's operations into a google/nftables connection as one batch
// without sending it, and the readiness probe rules (ProbeRules,
// QueueProbes, ProbeOf). Everything here runs without privilege; the
// tests capture the netlink bytes through a test dialer and evaluate the
// planned expressions in a small interpreter against netpolicy.Decider.
//
// What does not: sending the batch, reading the ruleset back, namespaces,
// links and routes (pkg/netpath), and the policy records themselves
// (pkg/netpolicy).
//
// # Ruleset
//
// Table "ip lazaret" carries the policy, table "ip6 lazaret" drops every
// IPv6 packet. The forward chain (policy drop) reads, first match wins:
//
//  1. ct state established,related: accept (return traffic, ICMP errors);
//  2. input interface is not the sandbox interface: drop;
//  3. output interface is not the upstream interface: goto deny;
//  4. ip daddr @structural: goto deny (0/8, 127/8, 169.254/16, 224/4, 240/4);
//  5. ip daddr @host: goto deny (the host's own addresses);
//  6. tcp or udp to port 53 and ip daddr @resolver: accept;
//  7. tcp or udp to port 53: goto deny;
//  8. ip daddr @allowed: accept;
//  9. goto deny.
//
// The input chain sends everything arriving from the sandbox interface to
// the deny chain and accepts only loopback and return traffic otherwise;
// the postrouting NAT chain masquerades what leaves through the upstream
// interface. The regular chain "deny" holds one rule, drop. Every packet
// of the sandbox that the policy denies, and only such a packet, reaches
// it: the deny chain is the one place where the deny verdict is reached.
//
// # Readiness probe rules
//
// To prove a denied target unreachable without waiting for a timeout, the
// prober inserts, for the time of the probe, one rule per denied target at
// the head of the deny chain (ProbeRules). A probe rule matches exactly
// that probe's TCP SYN (sandbox interface, source address and port,
// destination address and port, SYN without ACK, RST or FIN), counts it,
// and answers it with a TCP reset. Since only denied packets reach the
// deny chain, a probe rule can only turn a silent drop of that one SYN
// into a reset; it cannot accept anything, and a SYN the ruleset accepts
// never meets it, so its counter stays zero. ProbeOf recognizes a probe
// rule read back from the kernel, counter aside, so that the executor can
// read its counter and delete it.
//
// # Longest prefix match
//
// nftables has no longest-prefix rule. The planner computes it ahead of
// time: every prefix boundary cuts the IPv4 space into elementary intervals
// on which no rule begins or ends, so the longest matching rule is the same
// for every address of an interval. Each interval takes the decision of
// its longest matching rule (none: the default, deny); adjacent allowed
// intervals merge; the allowed ones become the elements of the interval set
// @allowed. An address is in @allowed exactly when netpolicy.Decider's
// longest-prefix step allows it. Addresses from 224.0.0.0 up are cut off
// the set: rule 4 drops them first, and an interval set cannot express an
// end beyond 255.255.255.255.
package nftplan
