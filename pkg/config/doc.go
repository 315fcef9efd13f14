// Package config loads, validates and resolves the Lazaret trusted host
// configuration v1 (schema "lazaret-trusted-host-config-v1") and v2
// ("lazaret-trusted-host-config-v2": v1 plus host-name policy and brokered
// credentials) and computes DomainIdV1 and ConfigurationFingerprintV1 or V2.
// It also holds the pure host-name matcher (MatchHost, DecideHost) that
// enforcement applies.
//
// Resolution is a pure planner over the document and the host as it is: it
// reads the filesystem and the environment but creates, writes and deletes
// nothing. Its only successful output is a *ResolvedDomainConfiguration,
// which owns the O_PATH descriptors of every volume source
// (ConfinedPathPlan) and the resolved environment values, and refuses
// serialization. Every other outcome is an *InvalidError listing every
// problem found, each with file, line, column, field path and Rule.
//
// Files:
//   - document.go: strict TOML decoding (go-toml/v2) into the v1 or v2
//     shape, and key positions.
//   - grammar.go: names, paths, image references, DNS names.
//   - validate.go: the rules that need only the document.
//   - network.go: prefixes, effective sets, readiness.
//   - hosts.go: host patterns, MatchHost and DecideHost.
//   - source.go: openat2 source plans and executable checks (Linux).
//   - resolve.go: Resolve and ResolvedDomainConfiguration.
//   - credentials.go: v2 brokered credentials: their rules, the checks of
//     their host values and upstream_ca files, and Credential.
//   - summary.go: Summarize, the profile names and roots of a document
//     without a selected profile or workspace.
//   - digest.go: the digest preimages.
//   - extraargs.go: the one table of executables whose arguments can run a
//     command or write a file, the extra-argument check of prefix rules
//     (AutoApprovalRule.CheckExtraArgs) and the `config check` warning.
//
// The sandbox layout lives in package layout and path defaults in package
// paths; executing a plan (creating a pending directory, mounting a source)
// belongs to the processes that own those steps, not here.
package config
