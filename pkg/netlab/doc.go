// Package netlab gives network tests their own "internet": a fresh
// network (and, when not root, user) namespace for the whole test, hosts
// on TEST-NET and other addresses inside namespaces the test creates, veth
// links between them, TCP services and a tiny DNS resolver. No packet of a
// lab leaves the namespaces it creates.
//
// What belongs here: test scaffolding shared by the network packages and
// the network sidecar's tests. What does not: anything the product runs.
package netlab
