package broker

import (
	"bytes"
	"cmp"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Config is everything the proxy needs: the authority that signs its leaves
// and the credentials it brokers. It travels from the coordinator to the
// network sidecar inside a sealed memfd, as Encode writes it.
//
// A Config prints without values, placeholders or key under every fmt verb.
type Config struct {
	Authority   *Authority
	Credentials []Credential
}

// reservedHeaders are the fields a SchemeHeader credential may not name:
// authorization carries the other schemes, and the rest are framing, routing
// or session fields the proxy and upstream interpret themselves.
var reservedHeaders = []string{
	"authorization", "proxy-authorization", "host", "cookie", "connection",
	"transfer-encoding", "content-length", "te", "upgrade", "keep-alive", "trailer",
}

// Validate reports the first rule c breaks: every credential needs a valid
// name, value and placeholder (as long as the value and different), a sane
// scheme and header, and non-empty destinations with nonzero ports among the
// authority's hosts; no two credentials may share a name or placeholder, have
// one's placeholder inside another's placeholder or value, or claim the same
// header field at the same destination.
func (c *Config) Validate() error {
	if c.Authority == nil || c.Authority.cert == nil {
		return ErrNoAuthority
	}
	for i := range c.Credentials {
		if err := c.validateCredential(&c.Credentials[i]); err != nil {
			return fmt.Errorf("credential %d (%s): %w", i, c.Credentials[i].Name, err)
		}
	}
	return c.validateAcross()
}

// validateCredential checks one credential on its own.
func (c *Config) validateCredential(cr *Credential) error {
	if !validEnvName(cr.Name) {
		return ErrCredentialName
	}
	if err := CheckValue(cr.Value); err != nil {
		return fmt.Errorf("value: %w", err)
	}
	if err := CheckValue(cr.Placeholder); err != nil {
		return fmt.Errorf("placeholder: %w", err)
	}
	if len(cr.Placeholder) != len(cr.Value) || cr.Placeholder == cr.Value {
		return ErrPlaceholderShape
	}
	if err := checkSchemeHeader(cr.Scheme, cr.Header); err != nil {
		return err
	}
	if len(cr.Destinations) == 0 {
		return ErrNoDestinations
	}
	for j, d := range cr.Destinations {
		if err := c.checkDestination(d); err != nil {
			return fmt.Errorf("destination %s: %w", d, err)
		}
		if slices.Contains(cr.Destinations[:j], d) {
			return fmt.Errorf("destination %s: %w", d, ErrDuplicate)
		}
	}
	if len(cr.UpstreamCA) > 0 && !x509.NewCertPool().AppendCertsFromPEM(cr.UpstreamCA) {
		return ErrUpstreamCA
	}
	return nil
}

// validEnvName reports whether s is an environment variable name.
func validEnvName(s string) bool {
	if s == "" || CharClass(s[0]) == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if CharClass(s[i]) == 0 && s[i] != '_' {
			return false
		}
	}
	return true
}

// checkSchemeHeader reports why scheme and header do not fit together.
func checkSchemeHeader(scheme Scheme, header string) error {
	switch scheme {
	case SchemeBearer, SchemeBasic:
		if header != "" {
			return fmt.Errorf("header %q with scheme %s: %w", header, scheme, ErrHeaderName)
		}
	case SchemeHeader:
		if !validToken(header) || header != strings.ToLower(header) || slices.Contains(reservedHeaders, header) {
			return fmt.Errorf("header %q: %w", header, ErrHeaderName)
		}
	default:
		return fmt.Errorf("scheme %s: %w", scheme, ErrUnknownScheme)
	}
	return nil
}

// validToken reports whether s is an HTTP token (RFC 9110 section 5.6.2).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if CharClass(s[i]) == 0 && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(s[i])) {
			return false
		}
	}
	return true
}

// checkDestination reports why d cannot be brokered under c's authority.
func (c *Config) checkDestination(d Destination) error {
	if err := checkHost(d.Host); err != nil {
		return err
	}
	if d.Port == 0 {
		return ErrZeroPort
	}
	if !c.Authority.has(d.Host) {
		return ErrNotBrokered
	}
	return nil
}

// validateAcross checks the rules that relate credentials to each other.
func (c *Config) validateAcross() error {
	type claim struct {
		dest  Destination
		field string
	}
	claims := map[claim]string{}
	for i := range c.Credentials {
		a := &c.Credentials[i]
		for j := range c.Credentials {
			b := &c.Credentials[j]
			if i == j {
				continue
			}
			if a.Name == b.Name {
				return fmt.Errorf("credential name %s: %w", a.Name, ErrDuplicate)
			}
			if strings.Contains(b.Placeholder, a.Placeholder) || strings.Contains(b.Value, a.Placeholder) {
				return fmt.Errorf("credentials %s and %s: %w", a.Name, b.Name, ErrPlaceholderClash)
			}
		}
		if strings.Contains(a.Value, a.Placeholder) {
			return fmt.Errorf("credential %s: %w", a.Name, ErrPlaceholderClash)
		}
		for _, d := range a.Destinations {
			k := claim{d, a.Field()}
			if other, ok := claims[k]; ok {
				return fmt.Errorf("credentials %s and %s, header %s at %s: %w", other, a.Name, k.field, d, ErrFieldClaimed)
			}
			claims[k] = a.Name
		}
	}
	return nil
}

// Ports returns the distinct destination ports, sorted.
func (c *Config) Ports() []uint16 {
	var ports []uint16
	for _, d := range c.Destinations() {
		ports = append(ports, d.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// Destinations returns the distinct destinations of all credentials, sorted
// by host, then port.
func (c *Config) Destinations() []Destination {
	var ds []Destination
	for i := range c.Credentials {
		ds = append(ds, c.Credentials[i].Destinations...)
	}
	slices.SortFunc(ds, func(a, b Destination) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
	})
	return slices.Compact(ds)
}

// Serves reports whether d is a destination of some credential.
func (c *Config) Serves(d Destination) bool {
	for i := range c.Credentials {
		if c.Credentials[i].Allows(d) {
			return true
		}
	}
	return false
}

// wireVersion identifies the encoding Encode writes.
const wireVersion = "lazaret-broker-config-v1"

// wireConfig is the JSON form of a Config.
type wireConfig struct {
	Version     string           `json:"version"`
	CA          []byte           `json:"ca_der"`
	Key         []byte           `json:"ca_key_pkcs8"`
	Credentials []wireCredential `json:"credentials"`
}

// wireCredential is the JSON form of a Credential.
type wireCredential struct {
	Name         string            `json:"name"`
	Scheme       string            `json:"scheme"`
	Header       string            `json:"header,omitempty"`
	Destinations []wireDestination `json:"destinations"`
	Placeholder  string            `json:"placeholder"`
	Value        string            `json:"value"`
	UpstreamCA   string            `json:"upstream_ca,omitempty"`
}

// wireDestination is the JSON form of a Destination.
type wireDestination struct {
	Host string `json:"host"`
	Port uint16 `json:"port"`
}

// Encode validates c and returns its deterministic encoding: JSON holding
// the authority's certificate (DER) and key (PKCS #8) and the credentials in
// order. The encoding holds secrets; it belongs only in a sealed memfd.
func (c *Config) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.Authority.key)
	if err != nil {
		return nil, fmt.Errorf("encoding authority key: %w", err)
	}
	w := wireConfig{Version: wireVersion, CA: c.Authority.cert.Raw, Key: key, Credentials: []wireCredential{}}
	for _, cr := range c.Credentials {
		wc := wireCredential{Name: cr.Name, Scheme: cr.Scheme.String(), Header: cr.Header,
			Placeholder: cr.Placeholder, Value: cr.Value, UpstreamCA: string(cr.UpstreamCA)}
		for _, d := range cr.Destinations {
			wc.Destinations = append(wc.Destinations, wireDestination(d))
		}
		w.Credentials = append(w.Credentials, wc)
	}
	return json.Marshal(w)
}

// DecodeConfig decodes and validates a configuration Encode wrote. Unknown
// fields and trailing data are errors.
func DecodeConfig(b []byte) (*Config, error) {
	var w wireConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("decoding broker configuration: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decoding broker configuration: trailing data")
	}
	if w.Version != wireVersion {
		return nil, fmt.Errorf("broker configuration version %q: want %q", w.Version, wireVersion)
	}
	c, err := fromWire(&w)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// fromWire builds a Config from its JSON form.
func fromWire(w *wireConfig) (*Config, error) {
	k, err := x509.ParsePKCS8PrivateKey(w.Key)
	if err != nil {
		return nil, errors.New("decoding broker configuration: authority key is not PKCS #8")
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("decoding broker configuration: authority key is not ECDSA")
	}
	a, err := authorityFrom(w.CA, key)
	if err != nil {
		return nil, err
	}
	c := &Config{Authority: a}
	for i, wc := range w.Credentials {
		s, err := ParseScheme(wc.Scheme)
		if err != nil {
			return nil, fmt.Errorf("credential %d (%s): %w", i, wc.Name, err)
		}
		cr := Credential{Name: wc.Name, Scheme: s, Header: wc.Header, Placeholder: wc.Placeholder, Value: wc.Value}
		if wc.UpstreamCA != "" {
			cr.UpstreamCA = []byte(wc.UpstreamCA)
		}
		for _, d := range wc.Destinations {
			cr.Destinations = append(cr.Destinations, Destination(d))
		}
		c.Credentials = append(c.Credentials, cr)
	}
	return c, nil
}
