package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
)

// A credential (v2 only) is a profile env variable whose real value never
// enters the sandbox: the sandbox sees a placeholder, and the host-side
// credential broker (docs/NETWORK.md, "Credential broker") swaps the real
// value in only for requests to the credential's hosts. This file holds its
// declaration rules, the checks of its host value and upstream_ca file at
// resolve, and the Credential the broker reads.

// Credential schemes: how the broker presents the real value.
const (
	// SchemeBearer sends "Authorization: Bearer <value>".
	SchemeBearer = "bearer"
	// SchemeBasic sends "Authorization: Basic <base64(:value)>": the value
	// is the password.
	SchemeBasic = "basic"
	// SchemeHeader sends "<header>: <value>".
	SchemeHeader = "header"
)

// Limits of the credentials table and of a brokered value.
const (
	MaxCredentials        = 8       // per profile
	MaxCredentialHosts    = 16      // per credential
	DefaultCredentialPort = 443     // when port is left out
	MaxCredentialValue    = 4096    // bytes of a brokered host value
	MaxUpstreamCASize     = 1 << 20 // bytes of an upstream_ca file

	// A brokered value's placeholder keeps the value's leading part up to
	// the last '-' or '_' among its first placeholderWindow bytes and
	// replaces the rest, which must hold minPlaceholderAlnum letters or
	// digits so that the placeholder carries 64 random bits.
	placeholderWindow   = 24
	minPlaceholderAlnum = 12
)

// reservedHeaders are the header names a "header" credential may not set:
// the broker owns them, or they frame the request.
var reservedHeaders = []string{
	"authorization", "proxy-authorization", "host", "cookie", "connection",
	"transfer-encoding", "content-length", "te", "upgrade", "keep-alive", "trailer",
}

// Credential is one brokered credential of the selected profile. The real
// value stays behind ResolvedDomainConfiguration.EnvironmentValue(Env).
type Credential struct {
	Env        string   // sandbox variable, a key of the profile's env table
	Hosts      []string // strict DNS names, in declaration order
	Port       uint16
	Scheme     string // SchemeBearer, SchemeBasic or SchemeHeader
	Header     string // the lowercase header name; scheme "header" only
	UpstreamCA []byte // PEM of the extra roots for Hosts; nil when not configured
}

func (c Credential) clone() Credential {
	c.Hosts = slices.Clone(c.Hosts)
	c.UpstreamCA = slices.Clone(c.UpstreamCA)
	return c
}

// headerName is the header the broker sets for a scheme.
func headerName(scheme, header string) string {
	if scheme == SchemeHeader {
		return header
	}
	return "authorization"
}

// staticCredential is a credential declaration that passed every rule that
// needs no host access.
type staticCredential struct {
	at     fieldPath
	env    string
	hosts  []string
	port   uint16
	scheme string
	header string
	caPath string // "" when not configured
}

// checkHeaderToken returns why s is not a lowercase HTTP field name (an
// RFC 9110 token without uppercase letters), or "".
func checkHeaderToken(s string) string {
	if s == "" {
		return "must be a lowercase HTTP header name, found an empty string"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return fmt.Sprintf("%q must be a lowercase HTTP header name: letters a to z, digits and !#$%%&'*+-.^_`|~", sanitize(s))
	}
	return ""
}

// credentials checks the profile's credentials table against its env table
// and its effective host-name policy (sp.allowHosts, sp.denyHosts).
// hostsDeclared is whether any allow_hosts entry applies, valid or not, so
// that an invalid pattern is reported once, where it is written.
func (v *validator) credentials(sp *staticProfile, pd *profileDocV2, hostsDeclared bool) {
	lp := sp.at.key("credentials")
	if len(pd.Credentials) > MaxCredentials {
		v.add(lp, RuleCredentialCount, "must list at most %d credentials, found %d", MaxCredentials, len(pd.Credentials))
	}
	type destination struct {
		host   string
		port   uint16
		header string
	}
	envs := map[string]fieldPath{}
	dests := map[destination]fieldPath{}
	for i, cd := range pd.Credentials {
		at := lp.index(i)
		if cd == nil {
			cd = &credentialDoc{}
		}
		c := staticCredential{at: at, port: DefaultCredentialPort}
		good := true
		fail := func(f fieldPath, rule Rule, format string, args ...any) {
			v.add(f, rule, format, args...)
			good = false
		}

		switch _, inEnv := pd.Env[deref(cd.Env)]; {
		case cd.Env == nil:
			fail(at.key("env"), RuleRequired, "env is required: the name of a variable of this profile's env table")
		case !inEnv:
			fail(at.key("env"), RuleCredentialEnv, "%q is not a key of [%s.env]; a credential brokers one of the profile's env variables", sanitize(*cd.Env), sp.at)
		default:
			if first, dup := envs[*cd.Env]; dup {
				fail(at.key("env"), RuleCredentialEnv, "%s is already brokered by %s; a variable has at most one credential", *cd.Env, first)
				break
			}
			envs[*cd.Env] = at
			c.env = *cd.Env
		}

		hp := at.key("hosts")
		if n := len(cd.Hosts); n < 1 || n > MaxCredentialHosts {
			fail(hp, RuleCredentialHosts, "must list 1 to %d host names, found %d", MaxCredentialHosts, n)
		}
		for j, h := range cd.Hosts {
			ep := hp.index(j)
			switch {
			case checkString(h) != "":
				fail(ep, RuleString, "%s", checkString(h))
				continue
			case checkDNSName(h) != "":
				fail(ep, RuleDNSName, "%q %s (a credential host is one name, never a wildcard)", h, checkDNSName(h))
				continue
			case slices.Contains(c.hosts, h):
				fail(ep, RuleCredentialHosts, "%s is listed twice", h)
				continue
			}
			if len(sp.allowHosts) > 0 || !hostsDeclared {
				switch allowed, rule := DecideHost(sp.allowHosts, sp.denyHosts, h); {
				case !allowed && rule != "":
					fail(ep, RuleCredentialPolicy, "%s is denied by effective deny_hosts pattern %s; a credential host must be allowed", h, rule)
				case !allowed:
					fail(ep, RuleCredentialPolicy, "%s matches no effective allow_hosts pattern; a credential host must be allowed (add it to allow_hosts)", h)
				}
			}
			c.hosts = append(c.hosts, h)
		}

		if cd.Port != nil {
			if p := *cd.Port; p < 1 || p > 65535 {
				fail(at.key("port"), RulePort, "port %d must be between 1 and 65535", p)
			} else {
				c.port = uint16(p)
			}
		}

		schemeOK := false
		switch {
		case cd.Scheme == nil:
			fail(at.key("scheme"), RuleRequired, `scheme is required: "bearer", "basic" or "header"`)
		case *cd.Scheme == SchemeBearer, *cd.Scheme == SchemeBasic, *cd.Scheme == SchemeHeader:
			c.scheme, schemeOK = *cd.Scheme, true
		default:
			fail(at.key("scheme"), RuleEnum, `must be "bearer", "basic" or "header", found %q`, sanitize(*cd.Scheme))
		}
		headerOK := schemeOK
		switch {
		case !schemeOK:
		case c.scheme == SchemeHeader && cd.Header == nil:
			fail(at.key("header"), RuleRequired, `header is required when scheme = "header": the lowercase name of the header that carries the value`)
			headerOK = false
		case c.scheme != SchemeHeader && cd.Header != nil:
			fail(at.key("header"), RuleCredentialHeader, `header is valid only with scheme = "header"; scheme %q always sends Authorization`, c.scheme)
			headerOK = false
		case c.scheme == SchemeHeader:
			h := *cd.Header
			if why := checkHeaderToken(h); why != "" {
				fail(at.key("header"), RuleCredentialHeader, "%s", why)
				headerOK = false
			} else if slices.Contains(reservedHeaders, h) {
				fail(at.key("header"), RuleCredentialHeader, "%s is reserved (refused: %s); use scheme \"bearer\" or \"basic\" for Authorization", h, strings.Join(reservedHeaders, ", "))
				headerOK = false
			} else {
				c.header = h
			}
		}
		if headerOK {
			name := headerName(c.scheme, c.header)
			for j, h := range c.hosts {
				d := destination{h, c.port, name}
				if first, dup := dests[d]; dup {
					fail(hp.index(j), RuleCredentialClash, "%s:%d already receives header %s from %s; two credentials may share a host and port only with different headers (bearer and basic both send authorization)", h, c.port, name, first)
					continue
				}
				dests[d] = at
			}
		}

		if cd.UpstreamCA != nil {
			ca := at.key("upstream_ca")
			if form, _, why := parseHostPath(*cd.UpstreamCA, false); why != "" {
				fail(ca, RuleHostPath, "%s", why)
			} else if form != formAbsolute {
				fail(ca, RuleCredentialCA, "upstream_ca must be an absolute path")
			} else {
				c.caPath = *cd.UpstreamCA
			}
		}
		if good {
			sp.credentials = append(sp.credentials, c)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkCredentialValue returns why a host value cannot be brokered, or "".
// The reason never contains the value.
func checkCredentialValue(val string) string {
	if len(val) == 0 || len(val) > MaxCredentialValue {
		return fmt.Sprintf("must be 1 to %d bytes long, found %d", MaxCredentialValue, len(val))
	}
	for i := 0; i < len(val); i++ {
		if c := val[i]; c < 0x21 || c > 0x7e {
			return "must consist of printable ASCII bytes without spaces (0x21 to 0x7e)"
		}
	}
	window := val[:min(len(val), placeholderWindow)]
	rest := val[strings.LastIndexAny(window, "-_")+1:]
	alnum := 0
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			alnum++
		}
	}
	if alnum < minPlaceholderAlnum {
		return fmt.Sprintf("is too short for a placeholder of 64 random bits: the part after the last '-' or '_' among its first %d bytes (the whole value when there is none) must have at least %d letters or digits",
			placeholderWindow, minPlaceholderAlnum)
	}
	return ""
}

// readUpstreamCA reads an upstream_ca file: a regular file of at most
// MaxUpstreamCASize bytes, owned by uid or root and writable by neither
// group nor others (whoever can change it can read the credential), holding
// at least one parseable CERTIFICATE block.
func readUpstreamCA(path string, uid int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("opening: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("inspecting: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid != 0 && int(st.Uid) != uid) {
		return nil, fmt.Errorf("must be owned by you or by root")
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("has mode %04o; it must not be writable by group or others (chmod go-w)", fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxUpstreamCASize+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(data) > MaxUpstreamCASize {
		return nil, fmt.Errorf("exceeds %d bytes", MaxUpstreamCASize)
	}
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("holds no parseable PEM CERTIFICATE block")
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err == nil {
			return data, nil
		}
	}
}

// credentials resolves the selected profile's credentials: the host value
// of every brokered variable (already looked up into cfg.env) must be fit
// for a placeholder, and every upstream_ca file is read.
func (r *resolver) credentials(cfg *ResolvedDomainConfiguration, sp *staticProfile) {
	hostOf := map[string]string{}
	for _, ref := range sp.env {
		hostOf[ref.SandboxName] = ref.HostName
	}
	for _, sc := range sp.credentials {
		c := Credential{Env: sc.env, Hosts: slices.Clone(sc.hosts), Port: sc.port, Scheme: sc.scheme, Header: sc.header}
		if val, ok := cfg.env.values[sc.env]; ok {
			if why := checkCredentialValue(val); why != "" {
				r.probs.add(sp.at.key("env").key(sc.env), RuleCredentialValue, "the value of host variable %s, brokered by %s, %s", hostOf[sc.env], sc.at, why)
			}
		}
		if sc.caPath != "" {
			roots, err := readUpstreamCA(sc.caPath, r.opts.Environment.UID)
			if err != nil {
				r.probs.add(sc.at.key("upstream_ca"), RuleCredentialCA, "upstream_ca %q: %v", sc.caPath, err)
				continue
			}
			c.UpstreamCA = roots
		}
		cfg.credentials = append(cfg.credentials, c)
	}
}
