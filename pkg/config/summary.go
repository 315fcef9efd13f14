package config

import (
	"fmt"
	"sort"
	"strings"

	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/paths"
)

// Summary is what a document states without a selected profile or a
// workspace: the names of its profiles and the roots every command
// shares. Commands that touch only the storage root (the image store,
// status) read it, and commands that act on one Domain use Profiles to
// default to the only profile.
type Summary struct {
	// SchemaVersion is 1 or 2.
	SchemaVersion int
	// Profiles are the declared profile names, sorted.
	Profiles []string
	// StorageRoot is the canonical storage.data_root, or the default of
	// package paths when the document sets none.
	StorageRoot string
	// RuntimeRoot is the canonical runtime root of package paths.
	RuntimeRoot string
	// Credentials are the brokered credentials of every profile that
	// declares any (v2 only), by profile name, in declaration order. They
	// name variables and destinations, never values.
	Credentials map[string][]CredentialSummary
}

// CredentialSummary is what a document states about one credential.
type CredentialSummary struct {
	Env    string // sandbox variable
	Scheme string // SchemeBearer, SchemeBasic or SchemeHeader
	Header string // scheme "header" only
	// Destinations are host:port, in declaration order.
	Destinations []string
	// UpstreamCA is the declared upstream_ca path; "" when not configured.
	UpstreamCA string
}

// String renders the credential on one line, such as
// "ANTHROPIC_API_KEY: header x-api-key to api.anthropic.com:443".
func (c CredentialSummary) String() string {
	how := c.Scheme
	if c.Scheme == SchemeHeader {
		how += " " + c.Header
	}
	s := fmt.Sprintf("%s: %s to %s", c.Env, how, strings.Join(c.Destinations, ", "))
	if c.UpstreamCA != "" {
		s += fmt.Sprintf(" (extra roots %s)", c.UpstreamCA)
	}
	return s
}

// Summarize validates the whole document with the rules that need neither
// a selected profile nor a workspace (every rule of validate.go and the
// roots) and returns its Summary, or an *InvalidError listing every
// problem found, each naming file and field. file names the document in
// problems. Like Resolve it creates nothing on the host, and a document
// Resolve accepts for some profile is always summarized.
func Summarize(data []byte, file string, env paths.Environment) (*Summary, error) {
	probs := &problems{file: file}
	doc, ix, version := parse(data, probs)
	if doc == nil {
		return nil, probs.err()
	}
	probs.index = ix
	v := &validator{problems: probs, layout: layout.Production(), version: version}
	profiles, _, _ := v.document(doc)
	var at fieldPath
	var decl *string
	if doc.Storage != nil && doc.Storage.DataRoot != nil {
		at, decl = root().key("storage").key("data_root"), doc.Storage.DataRoot
	}
	_, storage, runtime, _ := hostRoots(probs, env, at, decl)
	if !probs.empty() {
		return nil, probs.err()
	}
	names := make([]string, 0, len(doc.Profiles))
	for n := range doc.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	out := &Summary{SchemaVersion: version, Profiles: names, StorageRoot: storage, RuntimeRoot: runtime}
	for _, n := range names {
		for _, c := range profiles[n].credentials {
			cs := CredentialSummary{Env: c.env, Scheme: c.scheme, Header: c.header, UpstreamCA: c.caPath}
			for _, h := range c.hosts {
				cs.Destinations = append(cs.Destinations, fmt.Sprintf("%s:%d", h, c.port))
			}
			if out.Credentials == nil {
				out.Credentials = map[string][]CredentialSummary{}
			}
			out.Credentials[n] = append(out.Credentials[n], cs)
		}
	}
	return out, nil
}
