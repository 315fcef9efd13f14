package config

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"lazaret.dev/pkg/netpolicy"
)

// SchemaID is the v1 dispatch identifier.
const SchemaID = "lazaret-trusted-host-config-v1"

// SchemaIDV2 is the v2 dispatch identifier: the v1 document plus host-name
// policy (allow_hosts, deny_hosts, resolver, readiness hosts).
const SchemaIDV2 = "lazaret-trusted-host-config-v2"

// Host path prefixes.
const (
	homePrefix       = "~/"
	profileDirPrefix = "{profile_dir}/"
)

var (
	profileNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envNameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ReservedEnvPrefix begins the names Lazaret sets in every session; a
// profile cannot define or override them.
const ReservedEnvPrefix = "LAZARET_"

// ValidProfileName reports whether name is a v1 profile name.
func ValidProfileName(name string) bool {
	return profileNameRE.MatchString(name) && name != "." && name != ".."
}

func validEnvName(name string) bool { return envNameRE.MatchString(name) }

// checkString returns why s is not a valid configuration string, or "".
func checkString(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "must not contain a NUL character"
	}
	return ""
}

// forbiddenPathChars are characters that some shell, glob or template
// syntax would expand or interpret. v1 paths are literal, so they are
// refused rather than taken literally.
const forbiddenPathChars = "$`*?[]{}\\!%'\"~"

// checkComponents returns why the "/"-separated suffix is not a valid
// sequence of literal components, or "".
func checkComponents(suffix string) string {
	if suffix == "" {
		return "has an empty suffix"
	}
	if strings.HasPrefix(suffix, "/") || strings.Contains(suffix, "//") {
		return "has a repeated separator"
	}
	if strings.HasSuffix(suffix, "/") {
		return "has a trailing separator"
	}
	for _, c := range strings.Split(suffix, "/") {
		switch c {
		case "":
			return "has an empty component"
		case ".", "..":
			return fmt.Sprintf("has a %q component", c)
		}
		for _, r := range c {
			if r < 0x20 || r == 0x7f {
				return "contains a control character"
			}
			if strings.ContainsRune(forbiddenPathChars, r) {
				return fmt.Sprintf("contains %q; paths are literal and allow no expansion, variable, glob or shell syntax", r)
			}
		}
	}
	return ""
}

// hostPathForm is which base a host path declaration names.
type hostPathForm int

const (
	formAbsolute hostPathForm = iota
	formHome
	formProfileDir
)

// parseHostPath splits a host path declaration into its form and suffix, or
// returns why it is invalid. profileDirOK permits {profile_dir}/ (volume
// hosts only).
func parseHostPath(s string, profileDirOK bool) (hostPathForm, string, string) {
	if why := checkString(s); why != "" {
		return 0, "", why
	}
	var form hostPathForm
	var suffix string
	switch {
	case strings.HasPrefix(s, homePrefix):
		form, suffix = formHome, s[len(homePrefix):]
	case strings.HasPrefix(s, profileDirPrefix):
		if !profileDirOK {
			return 0, "", "must be absolute or begin with ~/ ({profile_dir}/ is allowed only for a volume host)"
		}
		form, suffix = formProfileDir, s[len(profileDirPrefix):]
	case strings.HasPrefix(s, "/"):
		form, suffix = formAbsolute, s[1:]
	default:
		if profileDirOK {
			return 0, "", "must be absolute or begin with ~/ or {profile_dir}/"
		}
		return 0, "", "must be absolute or begin with ~/"
	}
	if why := checkComponents(suffix); why != "" {
		return 0, "", why
	}
	return form, suffix, ""
}

// checkSandboxPath returns why s is not a v1 sandbox path, or "".
func checkSandboxPath(s string) string {
	if why := checkString(s); why != "" {
		return why
	}
	if !strings.HasPrefix(s, "/") {
		return "must be an absolute sandbox path"
	}
	if s == "/" {
		return "must not be the sandbox root"
	}
	return checkComponents(s[1:])
}

// OCI image references: [domain[:port]/]path[:tag][@digest], with the
// grammar of the distribution reference format.
var (
	imagePathComponent = `[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*`
	imageDomain        = `(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?`
	imageRE            = regexp.MustCompile(`^(?:(` + imageDomain + `)/)?(` + imagePathComponent + `(?:/` + imagePathComponent + `)*)` +
		`(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?` +
		`(?:@([a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}))?$`)
	sha256DigestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	imagePathRE    = regexp.MustCompile(`^` + imagePathComponent + `$`)
)

// checkImage returns why s is not an OCI image reference, or "".
func checkImage(s string) string {
	if s == "" {
		return "must be a nonempty OCI image reference"
	}
	if why := checkString(s); why != "" {
		return why
	}
	m := imageRE.FindStringSubmatch(s)
	if m == nil {
		return "must be an OCI image reference such as docker.io/library/debian:bookworm (lowercase repository path, optional :tag and @digest)"
	}
	domain, repo, digest := m[1], m[2], m[4]
	if domain != "" && !strings.ContainsAny(domain, ".:[") && domain != "localhost" {
		// "a/b" where a is not a registry host: a is part of the path and
		// must obey the path grammar.
		if !imagePathRE.MatchString(domain) {
			return "must be an OCI image reference: registry host or path component " + fmt.Sprintf("%q", domain) + " is invalid"
		}
	}
	if len(domain)+len(repo)+1 > 255 {
		return "must be an OCI image reference with a name of at most 255 characters"
	}
	if strings.HasPrefix(digest, "sha256:") && !sha256DigestRE.MatchString(digest) {
		return "must be an OCI image reference: a sha256 digest is 64 lowercase hex digits"
	}
	return ""
}

// checkDNSName returns why s is not a strict DNS name, or "". Strict means:
// lowercase ASCII letters, digits and hyphens only; two or more dot-separated
// labels of 1 to 63 characters that neither begin nor end with a hyphen; at
// most 253 characters; no trailing dot; and a final label that is not all
// digits (so no name can be mistaken for an IPv4 address).
func checkDNSName(s string) string {
	const rule = "must be a strict DNS name: lowercase LDH labels of 1 to 63 characters, at least two labels, at most 253 characters, no trailing dot"
	if netpolicy.CheckHostName(s) == nil {
		return ""
	}
	if last := s[strings.LastIndexByte(s, '.')+1:]; strings.Contains(s, ".") && last != "" && strings.Trim(last, "0123456789") == "" {
		return rule + ", and a final label that is not all digits"
	}
	return rule
}
