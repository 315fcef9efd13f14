// Package proxy is the credential broker's TLS-terminating proxy and its
// request decision; the material it works with (placeholders, the
// Authority, the Config) is package lazaret.dev/pkg/broker.
//
// # Rewrite rules
//
// For each header field, every value of it, and for the request target, raw
// and percent-decoded (repeatedly, so a doubly encoded placeholder is found),
// Rewrite finds every credential whose placeholder occurs as a substring.
// For Authorization and Proxy-Authorization values of the form
// "Basic <base64>" it also decodes the base64 (standard alphabet, padding
// optional) and searches the decoded text. Header names are compared case
// insensitively; a placeholder in a header name is refused.
//
// A placeholder occurrence is substituted only when all of these hold:
//
//   - the destination is one of the credential's Destinations;
//   - the field is the credential's own: Authorization for SchemeBearer and
//     SchemeBasic, Header for SchemeHeader;
//   - the field is given once;
//   - the whole value has exactly the scheme's form: "Bearer <placeholder>"
//     (the scheme word in any case, one space); for SchemeHeader the value is
//     the placeholder alone; "Basic <base64>" (one space) decoding to
//     "<user>:<placeholder>" where user does not contain the placeholder.
//
// Substitution writes the real value in place of the placeholder (for
// SchemeBasic, the base64 of "<user>:<value>"). Any other occurrence refuses
// the request, with a reason naming the credential, the destination, and
// where the placeholder was (the header field, the request target, or a
// destination not among the credential's, which the reason lists). A refused
// request is answered 403 and logged; nothing is substituted. A request with
// no placeholder anywhere passes unchanged. A header field holding CR, LF or
// NUL is refused and removed, so no rewritten header ever carries them.
//
// Request bodies and trailers are not inspected: a placeholder there passes
// on as it is, and no real value is ever written there.
//
// # Proxy
//
// The proxy accepts TLS 1.2 and later with ALPN "http/1.1" only, choosing
// the leaf by server name; a server name that is not a destination on the
// listener's port fails the handshake and is logged. A request whose Host
// header does not name the TLS server name is answered 421. Requests are
// forwarded over HTTPS to the same host and port (dialled through
// Options.Dial), with the Host header preserved and no X-Forwarded headers,
// verifying the upstream against the system roots plus the UpstreamCA of the
// credentials for that destination. Responses stream (flushed after every
// write, for server-sent events).
//
// In every response, each real value in a header, a trailer or an unencoded
// body is replaced by its placeholder, which has the same length, so
// Content-Length stays right; the body is scrubbed while it streams, holding
// back only bytes that could begin a value. For a substituted Basic
// credential, the base64 the upstream received is replaced too, by the
// base64 of what the sandbox sent. A brokered request asks for
// Accept-Encoding: identity; if the upstream still answers with an encoded
// body, the proxy answers 502 rather than pass on what it cannot scrub.
package proxy
