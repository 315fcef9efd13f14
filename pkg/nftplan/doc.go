// Package nftplan turns a derived network policy into the nftables ruleset
// of a generation's enforcement namespace, as a closed list of operations.
//
// What belongs here: the pure planner (Plan), the longest-prefix
// flattening that lets one interval-set lookup decide a destination
// (Flatten), the operation types an executor accepts, and Queue, which
// writes a plan's operations into a google/nftables connection as one
// batch without sending it. Everything here runs without privilege; the
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
//  3. output interface is not the upstream interface: drop;
//  4. ip daddr @structural: drop (0/8, 127/8, 169.254/16, 224/4, 240/4);
//  5. ip daddr @host: drop (the host's own addresses);
//  6. tcp or udp to port 53 and ip daddr @resolver: accept;
//  7. tcp or udp to port 53: drop;
//  8. ip daddr @allowed: accept;
//  9. the chain policy: drop.
//
// The input chain drops everything arriving from the sandbox interface and
// accepts only loopback and return traffic otherwise; the postrouting NAT
// chain masquerades what leaves through the upstream interface.
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
