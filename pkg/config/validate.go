package config

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"lazaret.dev/pkg/layout"
)

// VolumeKind is the declared type of a volume source.
type VolumeKind uint8

// Volume kinds; the values are their fingerprint bytes.
const (
	KindFile      VolumeKind = 0
	KindDirectory VolumeKind = 1
)

func (k VolumeKind) String() string {
	if k == KindFile {
		return "file"
	}
	return "directory"
}

// Access is how the sandbox may use a volume.
type Access uint8

// Access modes; the values are their fingerprint bytes.
const (
	ReadOnly  Access = 0
	ReadWrite Access = 1
)

func (a Access) String() string {
	if a == ReadOnly {
		return "read-only"
	}
	return "read-write"
}

// EnvironmentReference maps a sandbox variable to the host variable whose
// value it receives.
type EnvironmentReference struct {
	SandboxName string
	HostName    string
}

// staticVolume is a volume whose declaration passed every rule that needs
// no filesystem access.
type staticVolume struct {
	at        fieldPath
	form      hostPathForm
	suffix    string
	container string
	kind      VolumeKind
	access    Access
	create    bool
}

type staticRule struct {
	at     fieldPath
	form   hostPathForm
	suffix string
	args   []string
	extra  bool
}

// staticProfile is one profile after the document-only rules. ok is false
// when any of them failed.
type staticProfile struct {
	name        string
	at          fieldPath
	image       string
	isolate     bool
	persistent  []string
	env         []EnvironmentReference
	volumes     []staticVolume
	allow, deny []netip.Prefix
	// v2 host-name policy; empty for v1. resolver is invalid when unset.
	allowHosts, denyHosts []string
	resolver              netip.Addr
	readiness             *ReadinessV1
	hasReady              bool
	escalation            bool
	rules                 []staticRule
	credentials           []staticCredential // v2; in declaration order
	ok                    bool
}

// validator applies the document-only rules.
type validator struct {
	*problems
	layout  *layout.SandboxLayoutV1
	version int // schema version of the document, 1 or 2
	failed  bool
}

func (v *validator) add(at fieldPath, rule Rule, format string, args ...any) {
	v.failed = true
	v.problems.add(at, rule, format, args...)
}

// globalNetwork is the parsed network table.
type globalNetwork struct {
	allow, deny           *prefixSet
	allowHosts, denyHosts hostSet
	// allowHostsDeclared counts network.allow_hosts entries, valid or not.
	allowHostsDeclared int
}

func (v *validator) hostPatterns(at fieldPath, list []string, into hostSet) {
	for i, s := range list {
		if why := checkString(s); why != "" {
			v.add(at.index(i), RuleString, "%s", why)
			continue
		}
		if why := checkHostPattern(s); why != "" {
			v.add(at.index(i), RuleHostPattern, "%q %s", s, why)
			continue
		}
		into.add(s, at.index(i))
	}
}

func (v *validator) prefixes(at fieldPath, list []string, into *prefixSet) {
	for i, s := range list {
		p, why := parsePrefix(s)
		if why != "" {
			v.add(at.index(i), RulePrefix, "%s", why)
			continue
		}
		into.add(p, at.index(i))
	}
}

// document checks the root table and every profile and returns the
// profiles by name; a profile is usable only when its ok is set and the
// returned bool is true.
func (v *validator) document(doc *documentV2) (map[string]*staticProfile, *globalNetwork, bool) {
	v.failed = false
	want := SchemaID
	if v.version == 2 {
		want = SchemaIDV2
	}
	if doc.Schema == nil {
		v.add(root().key("schema"), RuleRequired, "schema is required and must be %q", want)
	} else if *doc.Schema != want {
		v.add(root().key("schema"), RuleSchema, "must be exactly %q, found %q", want, sanitize(*doc.Schema))
	}
	if doc.Storage != nil && doc.Storage.DataRoot != nil {
		if _, _, why := parseHostPath(*doc.Storage.DataRoot, false); why != "" {
			v.add(root().key("storage").key("data_root"), RuleHostPath, "%s", why)
		}
	}
	g := &globalNetwork{allow: newPrefixSet(), deny: newPrefixSet(), allowHosts: hostSet{}, denyHosts: hostSet{}}
	if doc.Network != nil {
		v.prefixes(root().key("network").key("default_allow"), doc.Network.DefaultAllow, g.allow)
		v.prefixes(root().key("network").key("default_deny"), doc.Network.DefaultDeny, g.deny)
		v.hostPatterns(root().key("network").key("allow_hosts"), doc.Network.AllowHosts, g.allowHosts)
		v.hostPatterns(root().key("network").key("deny_hosts"), doc.Network.DenyHosts, g.denyHosts)
		g.allowHostsDeclared = len(doc.Network.AllowHosts)
	}
	if len(doc.Profiles) == 0 {
		v.add(root().key("profiles"), RuleProfiles, "at least one profile is required, such as [profiles.dev]")
	}
	names := make([]string, 0, len(doc.Profiles))
	for name := range doc.Profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]*staticProfile, len(names))
	for _, name := range names {
		at := root().key("profiles").key(name)
		if !ValidProfileName(name) {
			v.add(at, RuleProfileName, "profile name %q must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}", sanitize(name))
			continue
		}
		out[name] = v.profile(name, at, doc.Profiles[name], g)
	}
	return out, g, !v.failed
}

// sanitize makes s safe to quote in a message: invalid UTF-8 and NUL are
// replaced.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

func (v *validator) profile(name string, at fieldPath, pd *profileDocV2, g *globalNetwork) *staticProfile {
	saved := v.failed
	v.failed = false
	if pd == nil {
		pd = &profileDocV2{}
	}
	sp := &staticProfile{name: name, at: at, isolate: true}
	if pd.Image == nil {
		v.add(at.key("image"), RuleRequired, "image is required")
	} else if why := checkImage(*pd.Image); why != "" {
		v.add(at.key("image"), RuleImage, "%s", why)
	} else {
		sp.image = *pd.Image
	}
	if pd.IsolateGitignored != nil {
		sp.isolate = *pd.IsolateGitignored
	}

	// Persistent directories.
	pdAt := at.key("persistent_dirs")
	for i, p := range pd.PersistentDirs {
		ep := pdAt.index(i)
		if why := checkSandboxPath(p); why != "" {
			v.add(ep, RuleSandboxPath, "%s", why)
			continue
		}
		if dest, bad := v.layout.Conflicts(p); bad {
			v.add(ep, RuleProtected, "%q intersects the protected sandbox destination %q", p, dest)
			continue
		}
		clash := false
		for _, q := range sp.persistent {
			if layout.Overlaps(p, q) {
				v.add(ep, RulePersistentOverlap, "%q equals or nests with persistent_dirs entry %q; persistent dirs must be neither equal nor ancestral", p, q)
				clash = true
				break
			}
		}
		if !clash {
			sp.persistent = append(sp.persistent, p)
		}
	}

	// Network.
	allow, deny := newPrefixSet(), newPrefixSet()
	for p, from := range g.allow.from {
		allow.add(p, from)
	}
	for p, from := range g.deny.from {
		deny.add(p, from)
	}
	v.prefixes(at.key("allow_egress"), pd.AllowEgress, allow)
	v.prefixes(at.key("deny_egress"), pd.DenyEgress, deny)
	for _, p := range rfc1918 {
		deny.add(p, fieldPath{})
	}
	for _, p := range allow.sorted() {
		if dfrom, both := deny.from[p]; both {
			where := "the built-in RFC 1918 deny set"
			if dfrom.String() != "" {
				where = dfrom.String()
			}
			v.add(allow.from[p], RulePrefixConflict, "prefix %s is both allowed and denied (by %s) in profile %q; an exact prefix may not be in both effective sets", p, where, name)
		}
	}
	sp.allow, sp.deny = allow.sorted(), deny.sorted()

	// Host names (v2; every list is empty in a v1 document).
	hostsDeclared := v.hostPolicy(sp, pd, g)

	// Readiness.
	if pd.Readiness != nil {
		sp.hasReady = true
		sp.readiness = v.readiness(at.key("readiness"), pd.Readiness, sp, hostsDeclared)
	}

	// Environment.
	envNames := make([]string, 0, len(pd.Env))
	for k := range pd.Env {
		envNames = append(envNames, k)
	}
	sort.Strings(envNames)
	for _, k := range envNames {
		ep := at.key("env").key(k)
		switch {
		case !validEnvName(k):
			v.add(ep, RuleEnvName, "sandbox variable name %q must match [A-Za-z_][A-Za-z0-9_]*", sanitize(k))
			continue
		case strings.HasPrefix(k, ReservedEnvPrefix):
			v.add(ep, RuleEnvName, "sandbox variable names beginning with %s are reserved for Lazaret", ReservedEnvPrefix)
			continue
		}
		ref := pd.Env[k]
		host, isRef := strings.CutPrefix(ref, "env:")
		if !isRef {
			// The value may be a secret typed in by mistake: never echo it.
			v.add(ep, RuleEnvReference, "value must be a reference env:NAME naming a host variable; literal values and other schemes are not allowed")
			continue
		}
		if !validEnvName(host) {
			v.add(ep, RuleEnvReference, "host variable name after env: must match [A-Za-z_][A-Za-z0-9_]*")
			continue
		}
		sp.env = append(sp.env, EnvironmentReference{SandboxName: k, HostName: host})
	}

	// Credentials (v2; none in a v1 document).
	v.credentials(sp, pd, hostsDeclared)

	// Volumes.
	for i, vd := range pd.Volumes {
		if vol, ok := v.volume(at.key("volumes").index(i), vd, sp.persistent); ok {
			clash := false
			for _, w := range sp.volumes {
				if layout.Overlaps(vol.container, w.container) {
					v.add(vol.at.key("container"), RuleVolumeOverlap, "%q equals or nests with the container path %q of %s; volume container paths must be distinct and non-ancestral", vol.container, w.container, w.at)
					clash = true
					break
				}
			}
			if !clash {
				sp.volumes = append(sp.volumes, vol)
			}
		}
	}

	// Escalation.
	if pd.Escalation != nil {
		e := pd.Escalation
		sp.escalation = e.Enabled != nil && *e.Enabled
		eat := at.key("escalation")
		if !sp.escalation && len(e.AutoApprove) > 0 {
			v.add(eat.key("auto_approve"), RuleEscalation, "auto-approval rules are valid only while escalation.enabled = true")
		}
		for i, rd := range e.AutoApprove {
			if r, ok := v.rule(eat.key("auto_approve").index(i), rd); ok {
				sp.rules = append(sp.rules, r)
			}
		}
	}
	sp.ok = !v.failed
	v.failed = v.failed || saved
	return sp
}

// hostPolicy computes the profile's effective host patterns and resolver.
// It reports whether any allow_hosts entry, valid or not, applies to the
// profile, which decides whether a resolver and readiness hosts are needed.
func (v *validator) hostPolicy(sp *staticProfile, pd *profileDocV2, g *globalNetwork) bool {
	at := sp.at
	allow, deny := maps.Clone(g.allowHosts), maps.Clone(g.denyHosts)
	v.hostPatterns(at.key("allow_hosts"), pd.AllowHosts, allow)
	v.hostPatterns(at.key("deny_hosts"), pd.DenyHosts, deny)
	sp.allowHosts, sp.denyHosts = allow.sorted(), deny.sorted()
	for _, h := range sp.allowHosts {
		if dfrom, both := deny[h]; both {
			v.add(allow[h], RuleHostConflict, "host pattern %s is both allowed and denied (by %s) in profile %q; an exact pattern may not be in both effective sets", h, dfrom, sp.name)
		}
	}
	declared := g.allowHostsDeclared+len(pd.AllowHosts) > 0
	rat := at.key("resolver")
	switch {
	case pd.Resolver == nil && declared:
		v.add(rat, RuleResolver, "resolver is required when the profile allows host names (allow_hosts): the IPv4 address of the upstream resolver that the host side forwards allowed names to")
	case pd.Resolver == nil:
	default:
		a, why := parseAddr(*pd.Resolver)
		if why != "" {
			v.add(rat, RuleAddress, "%s", why)
			break
		}
		if p, bad := structurallyDropped(a); bad {
			v.add(rat, RuleStructural, "resolver %s lies in %s, which the enforcement path always drops", a, p)
			break
		}
		if !declared {
			v.add(rat, RuleResolver, "resolver is set but the profile allows no host names; remove it or add allow_hosts")
			break
		}
		sp.resolver = a
	}
	return declared
}

func (v *validator) volume(at fieldPath, vd *volumeDoc, persistent []string) (staticVolume, bool) {
	if vd == nil {
		vd = &volumeDoc{}
	}
	vol := staticVolume{at: at, access: ReadWrite}
	ok := true
	if vd.Host == nil {
		v.add(at.key("host"), RuleRequired, "host is required")
		ok = false
	} else if form, suffix, why := parseHostPath(*vd.Host, true); why != "" {
		v.add(at.key("host"), RuleHostPath, "%s", why)
		ok = false
	} else {
		vol.form, vol.suffix = form, suffix
	}
	if vd.Container == nil {
		v.add(at.key("container"), RuleRequired, "container is required")
		ok = false
	} else if why := checkSandboxPath(*vd.Container); why != "" {
		v.add(at.key("container"), RuleSandboxPath, "%s", why)
		ok = false
	} else {
		c := *vd.Container
		vol.container = c
		if dest, bad := v.layout.Conflicts(c); bad {
			v.add(at.key("container"), RuleProtected, "%q intersects the protected sandbox destination %q", c, dest)
			ok = false
		} else {
			parents := 0
			for _, p := range persistent {
				if layout.IsBeneath(c, p) {
					parents++
				} else if c == p {
					parents = -1
					break
				}
			}
			switch {
			case parents == -1:
				v.add(at.key("container"), RuleVolumeParent, "%q equals a persistent dir; a volume must lie strictly beneath one", c)
				ok = false
			case parents != 1:
				v.add(at.key("container"), RuleVolumeParent, "%q must lie strictly beneath exactly one persistent_dirs entry", c)
				ok = false
			}
		}
	}
	switch {
	case vd.Kind == nil:
		v.add(at.key("kind"), RuleRequired, `kind is required: "file" or "directory"`)
		ok = false
	case *vd.Kind == "file":
		vol.kind = KindFile
	case *vd.Kind == "directory":
		vol.kind = KindDirectory
	default:
		v.add(at.key("kind"), RuleEnum, `must be "file" or "directory", found %q`, sanitize(*vd.Kind))
		ok = false
	}
	if vd.Access != nil {
		switch *vd.Access {
		case "read-only":
			vol.access = ReadOnly
		case "read-write":
			vol.access = ReadWrite
		default:
			v.add(at.key("access"), RuleEnum, `must be "read-only" or "read-write", found %q`, sanitize(*vd.Access))
			ok = false
		}
	}
	if vd.Create != nil && *vd.Create {
		vol.create = true
		if vd.Kind != nil && *vd.Kind == "file" {
			v.add(at.key("create"), RuleCreate, "create = true is valid only for a directory; a file source is never created")
			ok = false
		} else if vd.Host != nil && !strings.HasPrefix(*vd.Host, profileDirPrefix) {
			v.add(at.key("create"), RuleCreate, "create = true is valid only for a host path strictly beneath {profile_dir}/")
			ok = false
		}
	}
	return vol, ok
}

func (v *validator) rule(at fieldPath, rd *ruleDoc) (staticRule, bool) {
	if rd == nil {
		rd = &ruleDoc{}
	}
	r := staticRule{at: at}
	ok := true
	if rd.Executable == nil {
		v.add(at.key("executable"), RuleRequired, "executable is required")
		ok = false
	} else if form, suffix, why := parseHostPath(*rd.Executable, false); why != "" {
		v.add(at.key("executable"), RuleHostPath, "%s", why)
		ok = false
	} else {
		r.form, r.suffix = form, suffix
	}
	for i, a := range rd.Args {
		if why := checkString(a); why != "" {
			v.add(at.key("args").index(i), RuleString, "%s", why)
			ok = false
		}
	}
	r.args = slices.Clone(rd.Args)
	r.extra = rd.AllowExtraArgs != nil && *rd.AllowExtraArgs
	if r.extra && len(r.args) == 0 {
		v.add(at.key("allow_extra_args"), RuleArgs, "allow_extra_args = true requires at least one configured argument")
		ok = false
	}
	return r, ok
}

func (f hostPathForm) String() string {
	switch f {
	case formHome:
		return homePrefix
	case formProfileDir:
		return profileDirPrefix
	}
	return "/"
}

// expand joins a declaration's suffix to its base directory.
func expand(form hostPathForm, suffix, home, profileDir string) (string, error) {
	switch form {
	case formHome:
		if home == "" {
			return "", fmt.Errorf("~/ needs a home directory: $HOME is unset or not absolute")
		}
		return home + "/" + suffix, nil
	case formProfileDir:
		return profileDir + "/" + suffix, nil
	}
	return "/" + suffix, nil
}
