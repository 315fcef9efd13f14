// Package netlab gives network tests their own "internet": a fresh
// network (and, when not root, user) namespace for the whole test, hosts
// on TEST-NET and other addresses inside namespaces the test creates, veth
// links between them, TCP services and a tiny DNS resolver. No packet of a
// lab leaves the namespaces it creates.
//
// The test internet (StartInternet) also serves HTTPS on APIHost and
// OtherHost (TLSPort) under certificates of a fixed test CA (TestCAPEM):
// a credential check, Anthropic and OpenAI API doubles and a git
// repository, which accept only BrokerSecret, for the credential
// broker's tests.
//
// What belongs here: test scaffolding shared by the network packages and
// the network sidecar's tests. What does not: anything the product runs.
package netlab
