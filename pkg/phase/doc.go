// Package phase holds the phases of the application protocol model
// (tla/Lazaret.tla): the Domain phases (DomainPhases) and the Session
// phases (SessionPhases), their names and their text encoding.
//
// The Domain Store persists them by name (Generation.durable_decision and
// Session.session_phase are CBOR text strings, spec/schemas.md), the
// escalation engine and the audit log name a session's phase, and the
// model checker (package model) packs them into its state key. Each of
// those uses these types, so a phase is defined once.
//
// Numbering: the variants are numbered from 1 in the model's order, and
// the zero value is invalid, so a stored record missing the field fails
// validation. The numbers are never written anywhere; only the names are.
// The model checker numbers the same phases densely from 0 (Index and
// DomainAt, SessionAt convert).
//
// What does not belong here: the transitions between phases (the model
// in package model, the store's guards in package domainstore) and the
// other enumerations of the model (request phases, resource states).
package phase
