// Package pinresolver is the pinning DNS resolver of the network sidecar:
// it answers the sandbox's DNS queries inside the enforcement network
// namespace, forwards queries for allowed host names to one configured
// upstream resolver, and pins the IPv4 addresses it hands back so the
// sandbox may connect to them, and to nothing it did not ask for by an
// allowed name.
//
// What belongs here: parsing client queries and upstream answers as
// untrusted input, the name decision hook, the CNAME chain walk, the
// admission and pinning of addresses, and the UDP and TCP servers. What does
// not: the name policy itself (Config.Names), the static address policy
// (Config.Admit, normally backed by pkg/netpolicy), and the nftables set
// that holds the pins (Config.Pin); nor network namespaces. All of those are
// injected, so the whole package is tested without privilege.
//
// # Queries
//
// A query is parsed with golang.org/x/net/dns/dnsmessage. A message whose
// 12-byte header does not parse, or whose QR bit says it is a response, is
// dropped without a reply (Resolve returns a nil response and an error
// wrapping ErrDropped): answering a response could start a reply loop between
// two servers. An opcode other than QUERY is answered NOTIMP. The message
// must then hold exactly one question, empty answer and authority sections,
// and at most one OPT record (EDNS0) in the additional section, owned by the
// root name; other additional records (a TSIG, say) are parsed and ignored.
// Anything else, including any record that does not parse, is answered
// FORMERR with the ID, opcode and RD bit echoed and no question. An OPT
// record with an EDNS version other than 0 is answered BADVERS. A question
// of a class other than IN is answered REFUSED.
//
// Every other response echoes the ID and the question exactly as received
// (original letter case), copies RD, and sets RA. When the query carried an
// OPT record the response carries one too, advertising 1232 bytes.
//
// # Names
//
// The question name is lowercased (ASCII only) and its trailing dot removed.
// A name with any byte other than a letter, digit, hyphen or dot, or the
// root name, is not allowed and Config.Names is not consulted; otherwise
// Config.Names decides. A name that is not allowed is answered REFUSED,
// whatever the query type, and reported as a Refused event. REFUSED, not
// NXDOMAIN: NXDOMAIN is a cacheable negative proof that the name does not
// exist, which would be a lie, while REFUSED says that this server's policy
// declines to answer.
//
// # Allowed names
//
// For an allowed name, only queries of type A are forwarded. A query of
// type AAAA is answered NOERROR with no records because IPv6 is disabled in
// the sandbox; every other type (TXT, MX, SRV, ANY, ...) is answered the
// same way because its records carry no address this package pins. Those
// types are never forwarded, which confines DNS tunnelling to A lookups of
// allowed names. A residual channel remains: queries for allowed names do
// reach the upstream, so the name itself (a label under an allowed wildcard,
// say) can carry data to whoever operates the upstream or the allowed
// zone's name servers.
//
// An A query goes to Config.Upstream as a fresh message: a random 16-bit ID,
// the lowercased name, RD set, an EDNS0 OPT advertising 1232 bytes, sent
// from a new UDP socket (so a random source port) per query. Over UDP, a
// datagram whose ID, QR bit, opcode and question (name compared without
// regard to case, type A, class IN) do not all match is ignored as a
// possible spoof and the socket keeps reading until the attempt's deadline;
// the same query is sent again on the same socket every quarter of the
// attempt, so one lost datagram costs a quarter, not the whole attempt;
// when no matching answer arrives in time the client gets SERVFAIL. An
// answer with TC set is retried once over TCP, where a mismatching answer
// fails at once. Each attempt has its own Config.UpstreamTimeout. A failed
// exchange is answered SERVFAIL and reported as an Upstream event.
//
// An upstream RCODE other than NOERROR (NXDOMAIN, SERVFAIL, REFUSED, ...) is
// passed through to the client with no records and reported as an Unpinned
// event. For NOERROR only the answer section is read; the authority and
// additional sections are ignored entirely and nothing is ever pinned from
// them. In the answer section, records of class IN are considered: the
// CNAME chain is followed from the query name, one CNAME at a time whose
// owner is the current name, for at most MaxCNAMEHops hops; a loop, a name
// with CNAMEs to two different targets, or a longer chain makes the exchange
// fail (SERVFAIL).
// CNAME targets are not checked against Config.Names: the owner of an
// allowed name vouches for where it points, and every address still goes
// through Config.Admit. The A records owned by the final name of the chain
// are the candidate addresses; A records owned by any other name, including
// intermediate names of the chain (which by RFC 2181 cannot own other data),
// are ignored, as are records of every other type. An A record whose RDATA
// is not four bytes makes the answer malformed (SERVFAIL).
//
// Each candidate address is passed to Config.Admit. An address that is not
// admitted (a private or denied range, a DNS rebinding attempt) is dropped
// from the answer and reported as a Rebinding event with its reason. The
// admitted addresses, without duplicates, are pinned with Config.Pin BEFORE
// the response is sent, so the client can connect as soon as it has the
// answer; a Pin error makes the query SERVFAIL (PinFailed event). The pin
// lasts ttl = clamp(minimum TTL of the records used, MinTTL, MaxTTL), where
// the records used are the CNAMEs of the chain and the admitted A records.
// The response carries the CNAME chain (its first owner spelled as in the
// client's question) and the admitted A records, each with TTL set to the
// clamped value in whole seconds rounded down, so a client never caches an
// answer longer than its pin. The clamp can raise a TTL: an upstream TTL of
// 0 is answered and pinned for MinTTL, which is the price of letting a
// client connect after it has read the answer. Pin must extend an existing
// pin to at least ttl, and never shorten it. The pin starts when Pin is
// called and the client's cache when the answer arrives, so a client that
// uses the address at the very end of its TTL can find the pin gone by the
// delivery delay; rounding the TTL down absorbs part of that, and Pin may
// add a few seconds of grace.
//
// When every candidate address was refused, or there was none, the response
// is NOERROR with the CNAME chain and no A records, reported as an Unpinned
// event (after any Rebinding events).
//
// # Size and transport
//
// Over UDP a response must fit 512 bytes, or the size the query advertised
// in its OPT record, capped at 1232 and never below 512. A response that
// does not fit keeps as many whole answer records as fit, in order, and has
// TC set so the client retries over TCP. Resolve applies the stream limit of
// 65535 bytes; ResolveUDP applies the datagram limit.
//
// ServeUDP handles at most Config.MaxUDPInFlight queries at once and drops
// queries beyond that, so a flood costs at most that many goroutines and
// buffers. ServeTCP serves at most Config.MaxTCPConns connections, closing
// any beyond that at once; each connection carries one or more queries in
// two-byte length framing, answered in order, and is closed after
// Config.TCPIdleTimeout without a complete query.
//
// # Events
//
// Config.Event is called synchronously, once per decision: Pinned, Refused,
// Rebinding (one per address), Upstream, Malformed, Unpinned and PinFailed.
// Event.String renders one log line in which every byte of the name that
// is not a lowercase letter, digit, '.', '-', '_' or '*' is escaped as
// \xNN, so a hostile name cannot inject terminal escapes or line breaks.
package pinresolver
