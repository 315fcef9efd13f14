package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/paths"
)

// Errors about how Resolve was called (not about the document).
var (
	// ErrLayout means Options.Layout is not the production sandbox layout.
	ErrLayout = errors.New("resolution needs the production sandbox layout")
	// ErrWorkspace means Options.Workspace is not a canonical absolute path.
	ErrWorkspace = errors.New("workspace must be a canonical absolute path")
	// ErrNotSerializable is returned by every serialization method of
	// ResolvedDomainConfiguration.
	ErrNotSerializable = errors.New("a resolved domain configuration is a runtime value and cannot be serialized")
)

// MaxFileSize bounds the configuration file Lazaret reads.
const MaxFileSize = 1 << 20

// Options select what Resolve resolves and against which host.
type Options struct {
	// Profile is the exact, case-sensitive name of the selected profile.
	Profile string
	// Workspace is the canonical workspace path (see paths.Workspace).
	Workspace string
	// Layout is the sandbox layout; it must come from layout.Production.
	Layout *layout.SandboxLayoutV1
	// Environment supplies $HOME, the XDG variables, the runtime root, the
	// invoking user and the values behind env: references.
	Environment paths.Environment
	// File names the document in problems; empty for an in-memory one.
	File string
}

// ReadFile reads a configuration file that only its owner (the invoking
// user or root) can change. A file writable by group or others could be
// edited to auto-approve host commands, so it is refused.
func ReadFile(path string, uid int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("opening configuration: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("inspecting configuration: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("configuration %q is not a regular file", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid != 0 && int(st.Uid) != uid) {
		return nil, fmt.Errorf("configuration %q must be owned by you or by root", path)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("configuration %q has mode %04o; it must not be writable by group or others (chmod go-w)", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("configuration %q exceeds %d bytes", path, MaxFileSize)
	}
	return data, nil
}

// ResolveFile reads the file named by opts.File with ReadFile and resolves
// it. A read failure is reported as an *InvalidError with one RuleRead
// problem.
func ResolveFile(opts Options) (*ResolvedDomainConfiguration, error) {
	data, err := ReadFile(opts.File, opts.Environment.UID)
	if err != nil {
		return nil, &InvalidError{Problems: []Problem{{File: opts.File, Rule: RuleRead, Message: err.Error()}}}
	}
	return Resolve(data, opts)
}

// ResolvedVolume is a resolved volume: its fingerprint record and the plan
// through which its source is reached. The plan belongs to the
// configuration and is valid until the configuration's Close.
type ResolvedVolume struct {
	Record ResolvedVolumeRecord
	Plan   *ConfinedPathPlan
}

// ResolvedDomainConfiguration is the only successful result of resolving a
// selected profile. It owns retained descriptors and resolved environment
// values: pass the pointer on and Close it when done; never copy the value
// (go vet reports copies). It refuses every serialization.
type ResolvedDomainConfiguration struct {
	_           noCopy
	profile     string
	workspace   string
	storageRoot string
	runtimeRoot string
	profileDir  string
	version     int
	record      FingerprintRecordV2 // the host-name fields are empty for v1
	domainID    ids.DomainID
	fingerprint ids.Digest
	volumes     []ResolvedVolume
	credentials []Credential // v2; in declaration order
	env         secretEnv
	warnings    []Problem
	closed      bool
}

// secretEnv holds resolved environment values. It prints as redacted under
// every fmt verb.
type secretEnv struct{ values map[string]string }

func (secretEnv) Format(f fmt.State, _ rune) { io.WriteString(f, "[redacted]") }

// Warnings are what `config check` reports without failing, for every
// profile: today the WarnExtraArgs warning of each rule that sets
// allow_extra_args for an executable whose arguments can run a command or
// write a file (see ExtraArgsOf).
func (c *ResolvedDomainConfiguration) Warnings() []Problem { return slices.Clone(c.warnings) }

// Profile is the selected profile name.
func (c *ResolvedDomainConfiguration) Profile() string { return c.profile }

// Workspace is the canonical workspace path.
func (c *ResolvedDomainConfiguration) Workspace() string { return c.workspace }

// StorageRoot is the canonical storage root.
func (c *ResolvedDomainConfiguration) StorageRoot() string { return c.storageRoot }

// RuntimeRoot is the canonical runtime root. It may not exist yet; see
// paths.EnsureRuntimeRoot.
func (c *ResolvedDomainConfiguration) RuntimeRoot() string { return c.runtimeRoot }

// ProfileDir is <storage root>/profiles/<profile>.
func (c *ResolvedDomainConfiguration) ProfileDir() string { return c.profileDir }

// DomainID is DomainIdV1 of the selected profile and workspace.
func (c *ResolvedDomainConfiguration) DomainID() ids.DomainID { return c.domainID }

// SchemaVersion is the schema version of the document: 1 or 2.
func (c *ResolvedDomainConfiguration) SchemaVersion() int { return c.version }

// Fingerprint is ConfigurationFingerprintV1 for a v1 document and
// ConfigurationFingerprintV2 for a v2 document.
func (c *ResolvedDomainConfiguration) Fingerprint() ids.Digest { return c.fingerprint }

// FingerprintRecord returns a copy of the v1 record. For a v1 document the
// fingerprint hashes it; for a v2 document the fingerprint hashes
// FingerprintRecordV2, which contains it.
func (c *ResolvedDomainConfiguration) FingerprintRecord() FingerprintRecordV1 {
	return c.record.FingerprintRecordV1.clone()
}

// FingerprintRecordV2 returns a copy of the record that the fingerprint of a
// v2 document hashes; ok is false for a v1 document.
func (c *ResolvedDomainConfiguration) FingerprintRecordV2() (rec FingerprintRecordV2, ok bool) {
	if c.version != 2 {
		return FingerprintRecordV2{}, false
	}
	return c.record.clone(), true
}

// Image is the OCI image reference.
func (c *ResolvedDomainConfiguration) Image() string { return c.record.Image }

// IsolateGitignored reports whether git-ignored paths are routed to the
// Domain's isolated root.
func (c *ResolvedDomainConfiguration) IsolateGitignored() bool { return c.record.IsolateGitignored }

// PersistentDirs are the persistent sandbox directories, sorted.
func (c *ResolvedDomainConfiguration) PersistentDirs() []string {
	return slices.Clone(c.record.PersistentDirs)
}

// EnvironmentReferences are the sandbox variables and the host variables
// they come from, sorted by sandbox name.
func (c *ResolvedDomainConfiguration) EnvironmentReferences() []EnvironmentReference {
	return slices.Clone(c.record.EnvironmentReferences)
}

// EnvironmentValue returns the resolved value of a sandbox variable. Values
// are kept in memory only: never log, persist or hash them.
func (c *ResolvedDomainConfiguration) EnvironmentValue(sandboxName string) (string, bool) {
	v, ok := c.env.values[sandboxName]
	return v, ok
}

// Volumes are the resolved volumes in declaration order.
func (c *ResolvedDomainConfiguration) Volumes() []ResolvedVolume { return slices.Clone(c.volumes) }

// PendingCreates are the create=true volumes whose source directory does
// not exist yet. Resolution reports them and creates nothing.
func (c *ResolvedDomainConfiguration) PendingCreates() []ResolvedVolumeRecord {
	var out []ResolvedVolumeRecord
	for _, v := range c.volumes {
		if v.Plan.Pending() {
			out = append(out, v.Record)
		}
	}
	return out
}

// EffectiveAllow is the sorted effective allow set.
func (c *ResolvedDomainConfiguration) EffectiveAllow() []netip.Prefix {
	return slices.Clone(c.record.EffectiveAllow)
}

// EffectiveDeny is the sorted effective deny set, including RFC 1918.
func (c *ResolvedDomainConfiguration) EffectiveDeny() []netip.Prefix {
	return slices.Clone(c.record.EffectiveDeny)
}

// Decide applies the effective policy to an IPv4 address by longest-prefix
// match; no match denies. Structural drops are not part of it.
func (c *ResolvedDomainConfiguration) Decide(a netip.Addr) Decision {
	return decide(c.record.EffectiveAllow, c.record.EffectiveDeny, a)
}

// EffectiveAllowHosts is the sorted effective allow_hosts set (network and
// profile); nil for a v1 document.
func (c *ResolvedDomainConfiguration) EffectiveAllowHosts() []string {
	return slices.Clone(c.record.EffectiveAllowHosts)
}

// EffectiveDenyHosts is the sorted effective deny_hosts set; nil for a v1
// document.
func (c *ResolvedDomainConfiguration) EffectiveDenyHosts() []string {
	return slices.Clone(c.record.EffectiveDenyHosts)
}

// DecideHost applies the effective host-name policy to a lowercase query
// name (see the package function DecideHost).
func (c *ResolvedDomainConfiguration) DecideHost(name string) (allowed bool, rule string) {
	return DecideHost(c.record.EffectiveAllowHosts, c.record.EffectiveDenyHosts, name)
}

// NameResolver is the upstream resolver to which the host side forwards
// allowed names; ok is false when the profile allows no host names (and
// always for a v1 document).
func (c *ResolvedDomainConfiguration) NameResolver() (netip.Addr, bool) {
	return c.record.Resolver, c.record.Resolver.IsValid()
}

// Credentials are the brokered credentials of the profile (v2 only; nil
// otherwise), deep copies in declaration order. Their real values stay
// behind EnvironmentValue.
func (c *ResolvedDomainConfiguration) Credentials() []Credential {
	var out []Credential
	for _, cr := range c.credentials {
		out = append(out, cr.clone())
	}
	return out
}

// Readiness returns the readiness targets: denied, permitted and dns in
// declaration order, hosts sorted by name and port.
func (c *ResolvedDomainConfiguration) Readiness() ReadinessV1 { return c.record.Readiness.clone() }

// EscalationEnabled reports whether host escalation is enabled.
func (c *ResolvedDomainConfiguration) EscalationEnabled() bool { return c.record.EscalationEnabled }

// AutoApprovalRules are the resolved rules in declaration order.
func (c *ResolvedDomainConfiguration) AutoApprovalRules() []AutoApprovalRule {
	out := slices.Clone(c.record.AutoApprovalRules)
	for i := range out {
		out[i].Args = slices.Clone(out[i].Args)
	}
	return out
}

// Close releases every retained descriptor and forgets the environment
// values. It is safe to call more than once.
func (c *ResolvedDomainConfiguration) Close() error {
	if c == nil || c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, v := range c.volumes {
		errs = append(errs, v.Plan.Close())
	}
	clear(c.env.values)
	return errors.Join(errs...)
}

// String names the profile, Domain and fingerprint; it never prints
// environment values.
func (c *ResolvedDomainConfiguration) String() string {
	if c == nil {
		return "ResolvedDomainConfiguration(nil)"
	}
	return fmt.Sprintf("ResolvedDomainConfiguration{profile=%q workspace=%q domain=%s fingerprint=%s env=%d values redacted}",
		c.profile, c.workspace, hex.EncodeToString(c.domainID[:]), hex.EncodeToString(c.fingerprint[:]), len(c.env.values))
}

// GoString is String.
func (c *ResolvedDomainConfiguration) GoString() string { return c.String() }

// Format prints String under every verb, so %v, %+v and %#v cannot reach
// the environment values.
func (c *ResolvedDomainConfiguration) Format(f fmt.State, _ rune) { io.WriteString(f, c.String()) }

// MarshalJSON refuses: the value is a runtime authority.
func (c *ResolvedDomainConfiguration) MarshalJSON() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalText refuses.
func (c *ResolvedDomainConfiguration) MarshalText() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalBinary refuses.
func (c *ResolvedDomainConfiguration) MarshalBinary() ([]byte, error) { return nil, ErrNotSerializable }

// GobEncode refuses.
func (c *ResolvedDomainConfiguration) GobEncode() ([]byte, error) { return nil, ErrNotSerializable }

// Resolve validates the whole document, resolves the selected profile
// against the host and returns the configuration, or an *InvalidError
// listing every problem found. It creates nothing on the host.
func Resolve(data []byte, opts Options) (*ResolvedDomainConfiguration, error) {
	if !opts.Layout.Valid() {
		return nil, ErrLayout
	}
	if !filepath.IsAbs(opts.Workspace) || filepath.Clean(opts.Workspace) != opts.Workspace {
		return nil, fmt.Errorf("%w: %q", ErrWorkspace, opts.Workspace)
	}
	probs := &problems{file: opts.File}
	doc, ix, version := parse(data, probs)
	if doc == nil {
		return nil, probs.err()
	}
	probs.index = ix
	v := &validator{problems: probs, layout: opts.Layout, version: version}
	profiles, _, _ := v.document(doc)

	r := &resolver{opts: opts, probs: probs, version: version}
	var sp *staticProfile
	switch _, declared := doc.Profiles[opts.Profile]; {
	case !ValidProfileName(opts.Profile):
		probs.add(root(), RuleProfileSelection, "selected profile %q is not a valid profile name", sanitize(opts.Profile))
	case !declared:
		probs.add(root(), RuleProfileSelection, "profile %q is not declared; declared profiles: %s", opts.Profile, declaredNames(doc))
	default:
		sp = profiles[opts.Profile]
	}
	if sp != nil && !sp.hasReady {
		probs.add(sp.at.key("readiness"), RuleReadinessRequired, "the selected profile needs a [profiles.%s.readiness] table with denied, permitted and dns targets", quoteKey(sp.name))
	}
	var storageAt fieldPath
	var storageDecl *string
	if doc.Storage != nil && doc.Storage.DataRoot != nil {
		storageAt, storageDecl = root().key("storage").key("data_root"), doc.Storage.DataRoot
	}
	r.roots(storageAt, storageDecl)
	var cfg *ResolvedDomainConfiguration
	if sp != nil && r.rootsOK {
		cfg = r.profile(sp)
	}
	if !probs.empty() || cfg == nil {
		if cfg != nil {
			cfg.Close()
		}
		if probs.empty() {
			return nil, errors.New("resolving configuration: no result without a reported problem")
		}
		return nil, probs.err()
	}
	warnings := &problems{file: opts.File, index: ix}
	extraArgsWarnings(warnings, profiles, sp.name, cfg.record.AutoApprovalRules)
	cfg.warnings = warnings.result()
	return cfg, nil
}

func declaredNames(doc *documentV2) string {
	names := make([]string, 0, len(doc.Profiles))
	for n := range doc.Profiles {
		names = append(names, fmt.Sprintf("%q", sanitize(n)))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// resolver applies the rules that need the host filesystem and environment
// to the selected profile.
type resolver struct {
	opts        Options
	version     int
	probs       *problems
	home        string // canonical $HOME, "" when unknown
	storageRoot string
	runtimeRoot string
	profileDir  string
	rootsOK     bool
}

func (r *resolver) roots(at fieldPath, decl *string) {
	home, sc, rc, ok := hostRoots(r.probs, r.opts.Environment, at, decl)
	r.home = home
	if !ok {
		return
	}
	ws := r.opts.Workspace
	if layout.Overlaps(sc, ws) {
		r.probs.add(at, RuleRoot, "storage root %q and workspace %q must not contain one another", sc, ws)
		ok = false
	}
	if layout.Overlaps(rc, ws) {
		r.probs.add(root(), RuleRoot, "runtime root %q and workspace %q must not contain one another", rc, ws)
		ok = false
	}
	r.storageRoot, r.runtimeRoot, r.rootsOK = sc, rc, ok
}

// hostRoots computes the canonical $HOME ("" when unknown) and the
// canonical storage and runtime roots: the storage root is decl (the
// document's storage.data_root, at field at) or the default of package
// paths, the runtime root always the default of package paths. A root
// that cannot be computed is added to probs and ok is false.
func hostRoots(probs *problems, env paths.Environment, at fieldPath, decl *string) (home, storageRoot, runtimeRoot string, ok bool) {
	if h, err := env.Home(); err == nil {
		if c, err := paths.Canonical(h); err == nil {
			home = c
		}
	}
	var storage string
	if decl != nil {
		form, suffix, why := parseHostPath(*decl, false)
		if why != "" {
			return home, "", "", false // reported by the validator
		}
		p, err := expand(form, suffix, home, "")
		if err != nil {
			probs.add(at, RuleRoot, "storage root: %v", err)
			return home, "", "", false
		}
		storage = p
	} else {
		p, err := env.DefaultStorageRoot()
		if err != nil {
			probs.add(root(), RuleRoot, "%v; set storage.data_root or $XDG_DATA_HOME", err)
			return home, "", "", false
		}
		storage = p
	}
	sc, err := paths.Canonical(storage)
	if err != nil {
		probs.add(at, RuleRoot, "storage root %q: %v", storage, err)
		return home, "", "", false
	}
	rc, err := paths.Canonical(env.RuntimeRoot())
	if err != nil {
		probs.add(root(), RuleRoot, "runtime root %q: %v", env.RuntimeRoot(), err)
		return home, "", "", false
	}
	return home, sc, rc, true
}

func (r *resolver) profile(sp *staticProfile) *ResolvedDomainConfiguration {
	r.profileDir = r.storageRoot + "/profiles/" + sp.name
	cfg := &ResolvedDomainConfiguration{
		profile:     sp.name,
		workspace:   r.opts.Workspace,
		storageRoot: r.storageRoot,
		runtimeRoot: r.runtimeRoot,
		profileDir:  r.profileDir,
		env:         secretEnv{values: map[string]string{}},
	}
	for _, sv := range sp.volumes {
		r.volume(cfg, sv)
	}
	for _, ref := range sp.env {
		var val string
		ok := false
		if r.opts.Environment.LookupEnv != nil {
			val, ok = r.opts.Environment.LookupEnv(ref.HostName)
		}
		if !ok {
			r.probs.add(sp.at.key("env").key(ref.SandboxName), RuleEnvUnset, "host variable %s is not set in the environment of this command", ref.HostName)
			continue
		}
		cfg.env.values[ref.SandboxName] = val
	}
	r.credentials(cfg, sp)
	var rules []AutoApprovalRule
	seen := map[string]fieldPath{}
	for _, sr := range sp.rules {
		rule, ok := r.rule(cfg, sr)
		if !ok {
			continue
		}
		key := string(rule.encode())
		if first, dup := seen[key]; dup {
			r.probs.add(sr.at, RuleDuplicateRule, "rule duplicates %s after normalization (same canonical executable, arguments and allow_extra_args)", first)
			continue
		}
		seen[key] = sr.at
		rules = append(rules, rule)
	}
	if !r.probs.empty() || !sp.ok || sp.readiness == nil {
		return cfg
	}
	vols := make([]ResolvedVolumeRecord, len(cfg.volumes))
	for i, v := range cfg.volumes {
		vols[i] = v.Record
	}
	persistent := slices.Clone(sp.persistent)
	slices.Sort(persistent)
	cfg.version = r.version
	cfg.record.FingerprintRecordV1 = FingerprintRecordV1{
		SelectedProfile:       sp.name,
		CanonicalStorageRoot:  r.storageRoot,
		CanonicalRuntimeRoot:  r.runtimeRoot,
		Image:                 sp.image,
		IsolateGitignored:     sp.isolate,
		PersistentDirs:        persistent,
		EnvironmentReferences: slices.Clone(sp.env),
		Volumes:               vols,
		EffectiveAllow:        slices.Clone(sp.allow),
		EffectiveDeny:         slices.Clone(sp.deny),
		Readiness:             sp.readiness.clone(),
		EscalationEnabled:     sp.escalation,
		AutoApprovalRules:     rules,
	}
	cfg.domainID = DomainIDV1(sp.name, r.opts.Workspace)
	if r.version == 2 {
		cfg.record.EffectiveAllowHosts = slices.Clone(sp.allowHosts)
		cfg.record.EffectiveDenyHosts = slices.Clone(sp.denyHosts)
		cfg.record.Resolver = sp.resolver
		for _, c := range cfg.credentials {
			cfg.record.Credentials = append(cfg.record.Credentials, c.clone())
		}
		cfg.fingerprint = cfg.record.Digest()
	} else {
		cfg.fingerprint = cfg.record.FingerprintRecordV1.Digest()
	}
	return cfg
}

// volume checks where a source lies and resolves it into a plan.
func (r *resolver) volume(cfg *ResolvedDomainConfiguration, sv staticVolume) {
	at := sv.at.key("host")
	label, err := expand(sv.form, sv.suffix, r.home, r.profileDir)
	if err != nil {
		r.probs.add(at, RuleSource, "%v", err)
		return
	}
	switch ws := r.opts.Workspace; {
	case layout.Overlaps(label, ws):
		r.probs.add(at, RuleSourcePlacement, "source %q and the workspace %q must not contain one another; the workspace reaches the sandbox only through /workspace", label, ws)
		return
	case layout.Overlaps(label, r.runtimeRoot):
		r.probs.add(at, RuleSourcePlacement, "source %q and the runtime root %q must not contain one another", label, r.runtimeRoot)
		return
	case paths.Within(r.storageRoot, label):
		r.probs.add(at, RuleSourcePlacement, "source %q contains the storage root %q", label, r.storageRoot)
		return
	case layout.IsBeneath(label, r.storageRoot) && !layout.IsBeneath(label, r.profileDir):
		r.probs.add(at, RuleSourcePlacement, "source %q lies in the storage root %q outside this profile's directory %q", label, r.storageRoot, r.profileDir)
		return
	}
	plan, err := planSource(label, sv.kind, sv.create)
	if err != nil {
		r.probs.add(at, RuleSource, "source %q: %v", label, sourceReason(err))
		return
	}
	cfg.volumes = append(cfg.volumes, ResolvedVolume{
		Record: ResolvedVolumeRecord{
			CanonicalHostSource: label,
			ContainerPath:       sv.container,
			Kind:                sv.kind,
			Access:              sv.access,
			Create:              sv.create,
		},
		Plan: plan,
	})
}

// sourceReason turns a plan error into the sentence a user acts on.
func sourceReason(err error) string {
	switch {
	case errors.Is(err, ErrSymlink):
		return "the path crosses a symbolic link; name the real path (symbolic and magic links cannot satisfy a source)"
	case errors.Is(err, ErrMountCross):
		return "the source is a mount point or lies across one from its parent directory; mount crossings cannot satisfy a source"
	case errors.Is(err, ErrMissing):
		return "does not exist (only a create = true directory beneath {profile_dir}/ may be missing)"
	case errors.Is(err, syscall.ENOTDIR):
		return "a component of the path is not a directory"
	}
	return err.Error()
}

func (r *resolver) rule(cfg *ResolvedDomainConfiguration, sr staticRule) (AutoApprovalRule, bool) {
	at := sr.at.key("executable")
	declared, err := expand(sr.form, sr.suffix, r.home, "")
	if err != nil {
		r.probs.add(at, RuleExecutable, "%v", err)
		return AutoApprovalRule{}, false
	}
	canonical, err := filepath.EvalSymlinks(declared)
	if err != nil {
		r.probs.add(at, RuleExecutable, "executable %q cannot be resolved: %v", declared, errors.Unwrap(err))
		return AutoApprovalRule{}, false
	}
	trees := []struct{ what, dir string }{
		{"the workspace", r.opts.Workspace},
		{"the profile directory", r.profileDir},
		{"the Lazaret storage root", r.storageRoot},
		{"the Lazaret runtime root", r.runtimeRoot},
	}
	for _, v := range cfg.volumes {
		trees = append(trees, struct{ what, dir string }{"the volume source", v.Record.CanonicalHostSource})
	}
	for _, t := range trees {
		if paths.Within(canonical, t.dir) {
			r.probs.add(at, RuleExecutable, "executable %q lies inside %s %q; it must be outside the workspace, every volume source and every Lazaret tree", canonical, t.what, t.dir)
			return AutoApprovalRule{}, false
		}
	}
	if err := CheckExecutable(canonical, r.opts.Environment.UID); err != nil {
		r.probs.add(at, RuleExecutable, "%v", err)
		return AutoApprovalRule{}, false
	}
	return AutoApprovalRule{CanonicalExecutable: canonical, Args: slices.Clone(sr.args), AllowExtraArgs: sr.extra}, true
}
