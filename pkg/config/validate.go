package config

import (
	"fmt"
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
	readiness   *ReadinessV1
	hasReady    bool
	escalation  bool
	rules       []staticRule
	ok          bool
}

// validator applies the document-only rules.
type validator struct {
	*problems
	layout *layout.SandboxLayoutV1
	failed bool
}

func (v *validator) add(at fieldPath, rule Rule, format string, args ...any) {
	v.failed = true
	v.problems.add(at, rule, format, args...)
}

// globalNetwork is the parsed network table.
type globalNetwork struct {
	allow, deny *prefixSet
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
func (v *validator) document(doc *document) (map[string]*staticProfile, *globalNetwork, bool) {
	v.failed = false
	if doc.Schema == nil {
		v.add(root().key("schema"), RuleRequired, "schema is required and must be %q", SchemaID)
	} else if *doc.Schema != SchemaID {
		v.add(root().key("schema"), RuleSchema, "must be exactly %q, found %q", SchemaID, sanitize(*doc.Schema))
	}
	if doc.Storage != nil && doc.Storage.DataRoot != nil {
		if _, _, why := parseHostPath(*doc.Storage.DataRoot, false); why != "" {
			v.add(root().key("storage").key("data_root"), RuleHostPath, "%s", why)
		}
	}
	g := &globalNetwork{allow: newPrefixSet(), deny: newPrefixSet()}
	if doc.Network != nil {
		v.prefixes(root().key("network").key("default_allow"), doc.Network.DefaultAllow, g.allow)
		v.prefixes(root().key("network").key("default_deny"), doc.Network.DefaultDeny, g.deny)
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

func (v *validator) profile(name string, at fieldPath, pd *profileDoc, g *globalNetwork) *staticProfile {
	saved := v.failed
	v.failed = false
	if pd == nil {
		pd = &profileDoc{}
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

	// Readiness.
	if pd.Readiness != nil {
		sp.hasReady = true
		sp.readiness = v.readiness(at.key("readiness"), pd.Readiness, sp.allow, sp.deny)
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
