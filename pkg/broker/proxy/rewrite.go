package proxy

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"lazaret.dev/pkg/broker"
)

// Decision is the outcome of Rewrite.
type Decision struct {
	// Refused is true when the request must not be forwarded.
	Refused bool
	// Reason says, when Refused, which placeholders were where they do not
	// belong. It names credentials, destinations and header fields, never a
	// value or a placeholder.
	Reason string
	// Credentials are the names of the credentials substituted, or, when
	// Refused, of those involved in the refusal; sorted.
	Credentials []string
}

// Rewrite inspects one request's header and target for placeholders and, if
// every placeholder found is exactly where its credential belongs, swaps each
// for its real value in h. dest is where the request is going. The rules are
// the package's contract; see the package documentation. On refusal h is left
// as it was, except that fields holding CR, LF or NUL are removed.
func Rewrite(c *broker.Config, h http.Header, target string, dest broker.Destination) Decision {
	r := rewriter{cfg: c, dest: dest, h: h}
	names := r.scanNames()
	r.scanTarget(target)
	for _, name := range names {
		r.scanField(name, r.fields[name])
	}
	return r.finish()
}

// rewriter accumulates the findings of one Rewrite.
type rewriter struct {
	cfg     *broker.Config
	dest    broker.Destination
	h       http.Header
	fields  map[string][]fieldValue // by lowercase field name
	refused []string                // credential names
	reasons []string
	edits   []edit
}

// fieldValue locates one header value.
type fieldValue struct {
	key   string
	index int
}

// edit is one planned substitution.
type edit struct {
	at    fieldValue
	value string
	name  string
}

// scanNames groups h's values by lowercase field name and returns the names
// sorted. A header name carrying a placeholder, or a field holding CR, LF or
// NUL, is refused, and the latter removed.
func (r *rewriter) scanNames() []string {
	r.fields = map[string][]fieldValue{}
	keys := make([]string, 0, len(r.h))
	for k := range r.h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if r.nameHasPlaceholder(k) {
			continue
		}
		lk := strings.ToLower(k)
		if hasControl(k) || slices.ContainsFunc(r.h[k], hasControl) {
			r.refuse("", fmt.Sprintf("header %q holds a CR, LF or NUL byte", lk))
			delete(r.h, k)
			continue
		}
		for i := range r.h[k] {
			r.fields[lk] = append(r.fields[lk], fieldValue{k, i})
		}
	}
	names := make([]string, 0, len(r.fields))
	for n := range r.fields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// nameHasPlaceholder refuses, and reports, a header name that carries a
// placeholder.
func (r *rewriter) nameHasPlaceholder(k string) bool {
	found := false
	for i := range r.cfg.Credentials {
		cr := &r.cfg.Credentials[i]
		if strings.Contains(k, cr.Placeholder) || strings.Contains(strings.ToLower(k), cr.Placeholder) {
			r.refuse(cr.Name, fmt.Sprintf("placeholder of %s in a header name", cr.Name))
			found = true
		}
	}
	return found
}

// hasControl reports whether s holds CR, LF or NUL.
func hasControl(s string) bool {
	return strings.ContainsAny(s, "\r\n\x00")
}

// scanTarget refuses every placeholder in the request target, raw or
// percent-decoded.
func (r *rewriter) scanTarget(target string) {
	forms := targetForms(target)
	for i := range r.cfg.Credentials {
		cr := &r.cfg.Credentials[i]
		if !slices.ContainsFunc(forms, func(s string) bool { return strings.Contains(s, cr.Placeholder) }) {
			continue
		}
		if !cr.Allows(r.dest) {
			r.refuseDestination(cr)
			continue
		}
		r.refuse(cr.Name, fmt.Sprintf("placeholder of %s in the request target; it belongs only in header %s", cr.Name, cr.Field()))
	}
}

// targetForms returns target and its successive percent-decodings, up to
// three deep, so a doubly encoded placeholder is found too.
func targetForms(target string) []string {
	forms := []string{target}
	for range 3 {
		d := percentDecode(forms[len(forms)-1])
		if d == forms[len(forms)-1] {
			break
		}
		forms = append(forms, d)
	}
	return forms
}

// percentDecode decodes every valid %XX escape in s and '+' as a space,
// leaving malformed escapes as they are.
func percentDecode(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		case s[i] == '+':
			b.WriteByte(' ')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return broker.CharClass(c) == '0' || (c|0x20) >= 'a' && (c|0x20) <= 'f'
}

// unhex returns the value of the hexadecimal digit c.
func unhex(c byte) byte {
	if broker.CharClass(c) == '0' {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}

// scanField checks every credential's placeholder against the values of the
// header field name, planning a substitution where it is exactly in place.
func (r *rewriter) scanField(name string, vals []fieldValue) {
	for i := range r.cfg.Credentials {
		cr := &r.cfg.Credentials[i]
		if !slices.ContainsFunc(vals, func(fv fieldValue) bool { return r.occurs(cr, name, fv) }) {
			continue
		}
		switch {
		case !cr.Allows(r.dest):
			r.refuseDestination(cr)
		case name != cr.Field():
			r.refuse(cr.Name, fmt.Sprintf("placeholder of %s in header %s; it belongs only in header %s", cr.Name, name, cr.Field()))
		case len(vals) > 1:
			r.refuse(cr.Name, fmt.Sprintf("header %s is given %d times with a placeholder of %s; it must be given once", name, len(vals), cr.Name))
		default:
			r.substitute(cr, vals[0])
		}
	}
}

// occurs reports whether cr's placeholder occurs in the value fv of field
// name, raw or, for Authorization and Proxy-Authorization in the Basic form,
// base64-decoded.
func (r *rewriter) occurs(cr *broker.Credential, name string, fv fieldValue) bool {
	v := r.h[fv.key][fv.index]
	if strings.Contains(v, cr.Placeholder) {
		return true
	}
	if name != "authorization" && name != "proxy-authorization" {
		return false
	}
	d, ok := decodeBasic(v)
	return ok && strings.Contains(d, cr.Placeholder)
}

// decodeBasic returns the decoded credentials of a "Basic <base64>" value,
// tolerating a lowercase scheme word, extra spaces and missing padding.
func decodeBasic(v string) (string, bool) {
	if len(v) < 6 || !strings.EqualFold(v[:6], "basic ") {
		return "", false
	}
	b64 := strings.TrimRight(strings.TrimSpace(v[6:]), "=")
	d, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil {
		return "", false
	}
	return string(d), true
}

// substitute plans the swap of cr's placeholder in fv, or refuses if the
// value is not exactly in cr's scheme's form.
func (r *rewriter) substitute(cr *broker.Credential, fv fieldValue) {
	v := r.h[fv.key][fv.index]
	nv, ok := swap(cr, v)
	if !ok {
		r.refuse(cr.Name, fmt.Sprintf("placeholder of %s in header %s is not of the form %s", cr.Name, cr.Field(), form(cr)))
		return
	}
	r.edits = append(r.edits, edit{at: fv, value: nv, name: cr.Name})
}

// swap returns v with the placeholder replaced by the value, if v has
// exactly the form of c's scheme.
func swap(c *broker.Credential, v string) (string, bool) {
	switch c.Scheme {
	case broker.SchemeHeader:
		return c.Value, v == c.Placeholder
	case broker.SchemeBearer:
		const word = "Bearer "
		if len(v) != len(word)+len(c.Placeholder) || !strings.EqualFold(v[:len(word)], word) || v[len(word):] != c.Placeholder {
			return "", false
		}
		return v[:len(word)] + c.Value, true
	case broker.SchemeBasic:
		return swapBasic(c, v)
	}
	return "", false
}

// swapBasic is swap for broker.SchemeBasic: v must be "Basic <base64>" with one
// space, decoding to "<user>:<placeholder>" where user holds no placeholder.
func swapBasic(c *broker.Credential, v string) (string, bool) {
	d, ok := decodeBasic(v)
	if !ok || strings.Contains(v, c.Placeholder) || v[6] == ' ' || strings.HasSuffix(v, " ") {
		return "", false
	}
	user, found := strings.CutSuffix(d, ":"+c.Placeholder)
	if !found || strings.Contains(user, c.Placeholder) {
		return "", false
	}
	return v[:6] + base64.StdEncoding.EncodeToString([]byte(user+":"+c.Value)), true
}

// form describes the form c's scheme requires, for refusal reasons.
func form(c *broker.Credential) string {
	switch c.Scheme {
	case broker.SchemeBearer:
		return `"Bearer <placeholder>"`
	case broker.SchemeBasic:
		return `"Basic base64(<user>:<placeholder>)"`
	}
	return "<placeholder> alone"
}

// refuseDestination refuses cr's placeholder on its way to r.dest.
func (r *rewriter) refuseDestination(cr *broker.Credential) {
	r.refuse(cr.Name, fmt.Sprintf("placeholder of %s sent to %s, which is not one of its destinations (%s)",
		cr.Name, r.dest, cr.DestinationList()))
}

// refuse records a refusal involving the credential name (if any).
func (r *rewriter) refuse(name, reason string) {
	if name != "" {
		r.refused = append(r.refused, name)
	}
	if !slices.Contains(r.reasons, reason) {
		r.reasons = append(r.reasons, reason)
	}
}

// finish applies the planned substitutions unless something was refused.
func (r *rewriter) finish() Decision {
	if len(r.reasons) > 0 {
		return Decision{Refused: true, Reason: strings.Join(r.reasons, "; "), Credentials: sortedUnique(r.refused)}
	}
	var names []string
	for _, e := range r.edits {
		r.h[e.at.key][e.at.index] = e.value
		names = append(names, e.name)
	}
	return Decision{Credentials: sortedUnique(names)}
}

// sortedUnique returns s sorted without repeats.
func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
