// Package broker is Lazaret's credential broker: it keeps API keys out of
// the sandbox. The sandbox's environment holds a placeholder of the same
// shape as each real key; the sandbox's DNS answers brokered host names with
// the broker's address; the broker terminates TLS with leaves signed by a
// per-generation Authority the sandbox trusts, swaps placeholders for real
// values where they belong, and forwards the request to the real
// destination. Everything else passes untouched.
//
// What belongs here: placeholders (NewPlaceholder, CheckValue), the
// name-constrained Authority and the Config that travels to the network
// sidecar in a sealed memfd (Encode, DecodeConfig). The request decision
// (Rewrite) and the TLS-terminating Proxy that applies it are package
// lazaret.dev/pkg/broker/proxy: they need net/http, which the coordinator,
// which makes the material, must not link (testbin.HelperForbidden). What
// belongs in neither: resolving
// destination names and checking their addresses against the network policy
// (Options.Dial does that), DNS answers inside the sandbox, and sealing the
// memfd.
//
// # Secrets
//
// A real value is never logged, never part of an error or refusal reason,
// and never sent to the sandbox: Credential and Authority print redacted
// under every fmt verb, Events and Decisions hold credential names only, and
// upstream responses are scrubbed (package proxy).
package broker
