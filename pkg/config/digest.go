package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"

	"lazaret.dev/pkg/ids"
)

// Digest separators: the ASCII tag followed by one NUL byte.
const (
	domainIDTag      = "lazaret-domain-id-v1\x00"
	fingerprintTag   = "lazaret-configuration-fingerprint-v1\x00"
	fingerprintTagV2 = "lazaret-configuration-fingerprint-v2\x00"
)

// DomainIDPreimageV1 returns the DomainIdV1 preimage:
// "lazaret-domain-id-v1\0" || bytes(profile) || bytes(workspace).
func DomainIDPreimageV1(profile, canonicalWorkspace string) []byte {
	b := []byte(domainIDTag)
	b = appendBytes(b, []byte(profile))
	return appendBytes(b, []byte(canonicalWorkspace))
}

// DomainIDV1 is the SHA-256 digest of DomainIDPreimageV1.
func DomainIDV1(profile, canonicalWorkspace string) ids.DomainID {
	return ids.DomainID(sha256.Sum256(DomainIDPreimageV1(profile, canonicalWorkspace)))
}

// appendBytes appends bytes(x) = u32be(len(x)) || x. Lengths beyond u32
// cannot come from a configuration (it would not fit in memory as TOML),
// so exceeding them is a programming error.
func appendBytes(b, x []byte) []byte {
	if uint64(len(x)) > math.MaxUint32 {
		panic(fmt.Sprintf("digest field of %d bytes exceeds u32", len(x)))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(x)))
	return append(b, x...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendList appends u32be(count) || bytes(item)... with items sorted by
// unsigned bytewise order when sorted is set.
func appendList(b []byte, items [][]byte, sorted bool) []byte {
	if sorted {
		items = slices.Clone(items)
		slices.SortFunc(items, bytes.Compare)
	}
	if uint64(len(items)) > math.MaxUint32 {
		panic(fmt.Sprintf("digest list of %d items exceeds u32", len(items)))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(items)))
	for _, it := range items {
		b = appendBytes(b, it)
	}
	return b
}

// ResolvedVolumeRecord is the fingerprint record of one volume.
type ResolvedVolumeRecord struct {
	CanonicalHostSource string
	ContainerPath       string
	Kind                VolumeKind
	Access              Access
	Create              bool
}

// AutoApprovalRule is one resolved auto-approval rule: the canonical
// executable, its declared arguments and whether extra arguments may
// follow them.
type AutoApprovalRule struct {
	CanonicalExecutable string
	Args                []string
	AllowExtraArgs      bool
}

// Matches reports whether argv has the rule's form: argv[0] is
// byte-for-byte the canonical executable, every element is UTF-8 without
// NUL, and the remaining elements equal Args exactly, or, with
// AllowExtraArgs, begin with Args. A rule admits argv when it Matches and
// CheckExtraArgs finds nothing to refuse among the extra arguments.
func (r AutoApprovalRule) Matches(argv []string) bool {
	if len(argv) == 0 || argv[0] != r.CanonicalExecutable {
		return false
	}
	for _, a := range argv {
		if checkString(a) != "" {
			return false
		}
	}
	rest := argv[1:]
	if r.AllowExtraArgs {
		return len(r.Args) > 0 && len(rest) >= len(r.Args) && slices.Equal(rest[:len(r.Args)], r.Args)
	}
	return slices.Equal(rest, r.Args)
}

func (r AutoApprovalRule) encode() []byte {
	b := appendBytes(nil, []byte(r.CanonicalExecutable))
	args := make([][]byte, len(r.Args))
	for i, a := range r.Args {
		args[i] = appendBytes(nil, []byte(a))
	}
	b = appendList(b, args, false)
	return appendBool(b, r.AllowExtraArgs)
}

// FingerprintRecordV1 is ConfigurationFingerprintRecordV1: every resolved
// selected-profile field that the fingerprint covers. Environment values,
// descriptors and inode data are not part of it.
type FingerprintRecordV1 struct {
	SelectedProfile       string
	CanonicalStorageRoot  string
	CanonicalRuntimeRoot  string
	Image                 string
	IsolateGitignored     bool
	PersistentDirs        []string
	EnvironmentReferences []EnvironmentReference
	Volumes               []ResolvedVolumeRecord
	EffectiveAllow        []netip.Prefix
	EffectiveDeny         []netip.Prefix
	Readiness             ReadinessV1
	EscalationEnabled     bool
	AutoApprovalRules     []AutoApprovalRule
}

func prefixItems(ps []netip.Prefix) [][]byte {
	out := make([][]byte, len(ps))
	for i, p := range ps {
		a := p.Addr().As4()
		out[i] = append(a[:], byte(p.Bits()))
	}
	return out
}

func targetItems(ts []Target) [][]byte {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		a := t.Address.As4()
		out[i] = binary.BigEndian.AppendUint16(a[:], t.Port)
	}
	return out
}

// Preimage returns the canonical record that ConfigurationFingerprintV1
// hashes, with the network readiness lists placed right after the effective
// deny prefixes. Readiness.Hosts is not part of it (a v1 document has
// none; FingerprintRecordV2 covers them).
func (r *FingerprintRecordV1) Preimage() []byte {
	return r.appendFields([]byte(fingerprintTag))
}

// appendFields appends every field of the v1 record after the separator,
// in the v1 encoding and order. Both fingerprint versions share it.
func (r *FingerprintRecordV1) appendFields(b []byte) []byte {
	b = appendBytes(b, []byte(r.SelectedProfile))
	b = appendBytes(b, []byte(r.CanonicalStorageRoot))
	b = appendBytes(b, []byte(r.CanonicalRuntimeRoot))
	b = appendBytes(b, []byte(r.Image))
	b = appendBool(b, r.IsolateGitignored)

	items := make([][]byte, 0, 8)
	for _, p := range r.PersistentDirs {
		items = append(items, appendBytes(nil, []byte(p)))
	}
	b = appendList(b, items, true)

	items = items[:0:0]
	for _, e := range r.EnvironmentReferences {
		items = append(items, appendBytes(appendBytes(nil, []byte(e.SandboxName)), []byte(e.HostName)))
	}
	b = appendList(b, items, true)

	items = items[:0:0]
	for _, v := range r.Volumes {
		it := appendBytes(nil, []byte(v.CanonicalHostSource))
		it = appendBytes(it, []byte(v.ContainerPath))
		it = append(it, byte(v.Kind), byte(v.Access))
		items = append(items, appendBool(it, v.Create))
	}
	b = appendList(b, items, true)

	b = appendList(b, prefixItems(r.EffectiveAllow), true)
	b = appendList(b, prefixItems(r.EffectiveDeny), true)

	b = appendList(b, targetItems(r.Readiness.Denied), true)
	b = appendList(b, targetItems(r.Readiness.Permitted), true)
	items = items[:0:0]
	for _, d := range r.Readiness.DNS {
		a := d.Resolver.As4()
		items = append(items, appendBytes(a[:], []byte(d.Query)))
	}
	b = appendList(b, items, true)

	b = appendBool(b, r.EscalationEnabled)
	items = items[:0:0]
	for _, rule := range r.AutoApprovalRules {
		items = append(items, rule.encode())
	}
	return appendList(b, items, true)
}

// Digest is ConfigurationFingerprintV1, the SHA-256 digest of Preimage.
func (r *FingerprintRecordV1) Digest() ids.Digest {
	return ids.Digest(sha256.Sum256(r.Preimage()))
}

// FingerprintRecordV2 is the fingerprint record of a v2 document: every
// field of the v1 record, the readiness hosts (Readiness.Hosts) and the
// host-name policy.
type FingerprintRecordV2 struct {
	FingerprintRecordV1
	EffectiveAllowHosts []string
	EffectiveDenyHosts  []string
	// Resolver is the upstream resolver for allowed names; invalid when
	// the profile allows no host names.
	Resolver netip.Addr
	// Credentials are the brokered credentials, in declaration order; the
	// preimage covers them only when there is at least one.
	Credentials []Credential
}

func stringItems(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = appendBytes(nil, []byte(s))
	}
	return out
}

// Preimage returns the canonical record that ConfigurationFingerprintV2
// hashes: the v2 separator, every v1 field in the v1 encoding and order,
// then list(effective allow hosts), list(effective deny hosts),
// bytes(resolver: 4 address bytes, or none) and list(readiness hosts:
// bytes(name) || u16be(port)), then, only when the profile has
// credentials, list(credentials: bytes(env) || list(hosts: bytes(host)) ||
// u16be(port) || bytes(scheme) || bytes(header) || bytes(SHA-256 of the
// upstream_ca file, or empty)). A document without credentials keeps the
// preimage it had before credentials existed.
func (r *FingerprintRecordV2) Preimage() []byte {
	b := r.FingerprintRecordV1.appendFields([]byte(fingerprintTagV2))
	b = appendList(b, stringItems(r.EffectiveAllowHosts), true)
	b = appendList(b, stringItems(r.EffectiveDenyHosts), true)
	var resolver []byte
	if r.Resolver.IsValid() {
		a := r.Resolver.As4()
		resolver = a[:]
	}
	b = appendBytes(b, resolver)
	items := make([][]byte, len(r.Readiness.Hosts))
	for i, h := range r.Readiness.Hosts {
		items[i] = binary.BigEndian.AppendUint16(appendBytes(nil, []byte(h.Name)), h.Port)
	}
	b = appendList(b, items, true)
	if len(r.Credentials) == 0 {
		return b
	}
	items = make([][]byte, len(r.Credentials))
	for i, c := range r.Credentials {
		it := appendBytes(nil, []byte(c.Env))
		it = appendList(it, stringItems(c.Hosts), true)
		it = binary.BigEndian.AppendUint16(it, c.Port)
		it = appendBytes(it, []byte(c.Scheme))
		it = appendBytes(it, []byte(c.Header))
		var ca []byte
		if c.UpstreamCA != nil {
			sum := sha256.Sum256(c.UpstreamCA)
			ca = sum[:]
		}
		items[i] = appendBytes(it, ca)
	}
	return appendList(b, items, true)
}

// Digest is ConfigurationFingerprintV2, the SHA-256 digest of Preimage.
func (r *FingerprintRecordV2) Digest() ids.Digest {
	return ids.Digest(sha256.Sum256(r.Preimage()))
}

func (r FingerprintRecordV1) clone() FingerprintRecordV1 {
	r.PersistentDirs = slices.Clone(r.PersistentDirs)
	r.EnvironmentReferences = slices.Clone(r.EnvironmentReferences)
	r.Volumes = slices.Clone(r.Volumes)
	r.EffectiveAllow = slices.Clone(r.EffectiveAllow)
	r.EffectiveDeny = slices.Clone(r.EffectiveDeny)
	r.Readiness = r.Readiness.clone()
	r.AutoApprovalRules = slices.Clone(r.AutoApprovalRules)
	for i := range r.AutoApprovalRules {
		r.AutoApprovalRules[i].Args = slices.Clone(r.AutoApprovalRules[i].Args)
	}
	return r
}

func (r FingerprintRecordV2) clone() FingerprintRecordV2 {
	r.FingerprintRecordV1 = r.FingerprintRecordV1.clone()
	r.EffectiveAllowHosts = slices.Clone(r.EffectiveAllowHosts)
	r.EffectiveDenyHosts = slices.Clone(r.EffectiveDenyHosts)
	if r.Credentials != nil {
		cs := make([]Credential, len(r.Credentials))
		for i, c := range r.Credentials {
			cs[i] = c.clone()
		}
		r.Credentials = cs
	}
	return r
}
