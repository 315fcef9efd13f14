package coordinator

import (
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"lazaret.dev/pkg/broker"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/control"
)

// Sandbox paths of the credential broker's CA certificate: alone in the
// control directory (for programs that take one extra CA, such as
// NODE_EXTRA_CA_CERTS), and appended to the image's CA bundle, which is
// mounted over the image's trust store (bundle.TrustStores).
const (
	brokerCAName = "broker-ca.pem"
	trustName    = "ca-certificates.crt" // beneath the generation's etc directory
)

// brokerMaterial is what the credential broker of one generation needs
// (docs/NETWORK.md, "Credential broker"): a fresh CA whose key and the
// credentials' real values exist only in this process's memory and in
// the sealed memfd handed to the network sidecar, and one placeholder per
// credential, which is all the sandbox ever sees. Nil when the profile
// brokers no credential.
type brokerMaterial struct {
	config       *broker.Config
	encoded      []byte
	placeholders map[string]string // sandbox variable → placeholder
}

// newBrokerMaterial builds the generation's broker material from the
// resolved configuration, or returns nil for a profile without
// credentials.
func newBrokerMaterial(cfg *config.ResolvedDomainConfiguration, label string) (*brokerMaterial, error) {
	creds := cfg.Credentials()
	if len(creds) == 0 {
		return nil, nil
	}
	m := &brokerMaterial{config: &broker.Config{}, placeholders: map[string]string{}}
	var hosts []string
	for _, c := range creds {
		value, ok := cfg.EnvironmentValue(c.Env)
		if !ok {
			return nil, fmt.Errorf("credential %s: the profile's env table has no value for it", c.Env)
		}
		scheme, err := broker.ParseScheme(c.Scheme)
		if err != nil {
			return nil, fmt.Errorf("credential %s: %w", c.Env, err)
		}
		placeholder, err := broker.NewPlaceholder(value, rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("credential %s: %w", c.Env, err)
		}
		bc := broker.Credential{
			Name: c.Env, Scheme: scheme, Header: c.Header,
			Placeholder: placeholder, Value: value, UpstreamCA: c.UpstreamCA,
		}
		for _, h := range c.Hosts {
			bc.Destinations = append(bc.Destinations, broker.Destination{Host: h, Port: c.Port})
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
		m.config.Credentials = append(m.config.Credentials, bc)
		m.placeholders[c.Env] = placeholder
	}
	ca, err := broker.NewAuthority(label, hosts, time.Now(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making the credential broker's CA: %w", err)
	}
	m.config.Authority = ca
	if m.encoded, err = m.config.Encode(); err != nil {
		return nil, fmt.Errorf("encoding the credential broker's configuration: %w", err)
	}
	return m, nil
}

// sandboxValue is what the sandbox's variable name is set to: the
// placeholder of a brokered credential, else the resolved value.
func (m *brokerMaterial) sandboxValue(cfg *config.ResolvedDomainConfiguration, name string) (string, bool) {
	if m != nil {
		if p, ok := m.placeholders[name]; ok {
			return p, true
		}
	}
	return cfg.EnvironmentValue(name)
}

// caPEM is the CA certificate the sandbox trusts, nil without a broker.
func (m *brokerMaterial) caPEM() []byte {
	if m == nil {
		return nil
	}
	return m.config.Authority.CertificatePEM()
}

// encodedConfig is the sealed memfd's content: empty without a broker.
func (m *brokerMaterial) encodedConfig() []byte {
	if m == nil {
		return nil
	}
	return m.encoded
}

// record lists the brokered credentials for status: names, schemes and
// destinations, nothing secret. Nil without a broker.
func (m *brokerMaterial) record() []control.BrokeredCredential {
	if m == nil {
		return nil
	}
	var out []control.BrokeredCredential
	for _, c := range m.config.Credentials {
		bc := control.BrokeredCredential{Name: c.Name, Scheme: c.Scheme.String(), Header: c.Header, Destinations: []string{}}
		for _, d := range c.Destinations {
			bc.Destinations = append(bc.Destinations, d.String())
		}
		out = append(out, bc)
	}
	return out
}
