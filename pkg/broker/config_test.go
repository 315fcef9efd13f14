package broker_test

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"lazaret.dev/pkg/broker"
	"lazaret.dev/pkg/broker/brokertest"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *broker.Config)
		want   error
	}{
		{"valid", func(*broker.Config) {}, nil},
		{"no authority", func(c *broker.Config) { c.Authority = nil }, broker.ErrNoAuthority},
		{"bad name", func(c *broker.Config) { c.Credentials[0].Name = "1KEY" }, broker.ErrCredentialName},
		{"empty value", func(c *broker.Config) { c.Credentials[0].Value = "" }, broker.ErrEmptyValue},
		{"value byte", func(c *broker.Config) { c.Credentials[0].Value = strings.Replace(c.Credentials[0].Value, "X", "\n", 1) }, broker.ErrValueByte},
		{"placeholder length", func(c *broker.Config) { c.Credentials[0].Placeholder += "x" }, broker.ErrPlaceholderShape},
		{"placeholder equals value", func(c *broker.Config) { c.Credentials[1].Placeholder = c.Credentials[1].Value }, broker.ErrPlaceholderShape},
		{"shared placeholder", func(c *broker.Config) {
			c.Credentials[1].Value = c.Credentials[0].Value
			c.Credentials[1].Placeholder = c.Credentials[0].Placeholder
		}, broker.ErrPlaceholderClash},
		{"unknown scheme", func(c *broker.Config) { c.Credentials[1].Scheme = 9 }, broker.ErrUnknownScheme},
		{"header with bearer", func(c *broker.Config) { c.Credentials[1].Header = "x-api-key" }, broker.ErrHeaderName},
		{"uppercase header", func(c *broker.Config) { c.Credentials[0].Header = "X-Api-Key" }, broker.ErrHeaderName},
		{"reserved header", func(c *broker.Config) { c.Credentials[0].Header = "cookie" }, broker.ErrHeaderName},
		{"authorization header", func(c *broker.Config) { c.Credentials[0].Header = "authorization" }, broker.ErrHeaderName},
		{"header not a token", func(c *broker.Config) { c.Credentials[0].Header = "x api key" }, broker.ErrHeaderName},
		{"no destinations", func(c *broker.Config) { c.Credentials[2].Destinations = nil }, broker.ErrNoDestinations},
		{"zero port", func(c *broker.Config) { c.Credentials[2].Destinations[0].Port = 0 }, broker.ErrZeroPort},
		{"host outside authority", func(c *broker.Config) { c.Credentials[2].Destinations[0].Host = "github.example" }, broker.ErrNotBrokered},
		{"uppercase host", func(c *broker.Config) { c.Credentials[2].Destinations[0].Host = "Git.example" }, broker.ErrHostName},
		{"duplicate destination", func(c *broker.Config) {
			c.Credentials[2].Destinations = append(c.Credentials[2].Destinations, brokertest.GitDest)
		}, broker.ErrDuplicate},
		{"same field and destination", func(c *broker.Config) { c.Credentials[2].Destinations[0] = brokertest.OpenAIDest }, broker.ErrFieldClaimed},
		{"duplicate name", func(c *broker.Config) { c.Credentials[2].Name = "OPENAI_API_KEY" }, broker.ErrDuplicate},
		{"bad upstream CA", func(c *broker.Config) { c.Credentials[2].UpstreamCA = []byte("not pem") }, broker.ErrUpstreamCA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := brokertest.Config(t)
			tt.modify(c)
			err := c.Validate()
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
			for _, cr := range c.Credentials {
				if err != nil && cr.Value != "" && (strings.Contains(err.Error(), cr.Value) || strings.Contains(err.Error(), cr.Placeholder)) {
					t.Errorf("error %q shows a value or placeholder", err)
				}
			}
		})
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	c := brokertest.Config(t)
	c.Credentials[0].UpstreamCA = brokertest.Config(t).Authority.CertificatePEM()
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Encode()
	if err != nil || !bytes.Equal(b, again) {
		t.Fatalf("Encode is not deterministic (%v)", err)
	}
	d, err := broker.DecodeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	_, dKey := broker.AuthoritySigner(d.Authority)
	_, cKey := broker.AuthoritySigner(c.Authority)
	if !bytes.Equal(d.Authority.Certificate().Raw, c.Authority.Certificate().Raw) || !dKey.Equal(cKey) {
		t.Error("decoded authority differs")
	}
	if len(d.Credentials) != len(c.Credentials) {
		t.Fatalf("decoded %d credentials, want %d", len(d.Credentials), len(c.Credentials))
	}
	for i := range c.Credentials {
		a, b := c.Credentials[i], d.Credentials[i]
		if a.Name != b.Name || a.Scheme != b.Scheme || a.Header != b.Header || a.Value != b.Value || a.Placeholder != b.Placeholder ||
			!slices.Equal(a.Destinations, b.Destinations) || !bytes.Equal(a.UpstreamCA, b.UpstreamCA) {
			t.Errorf("credential %d: decoded %v, want %v", i, b, a)
		}
	}
	if re, err := d.Encode(); err != nil || !bytes.Equal(re, b) {
		t.Errorf("re-encoding the decoded configuration differs (%v)", err)
	}
}

func TestDecodeConfigRejects(t *testing.T) {
	b, err := brokertest.Config(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string][]byte{
		"trailing data":   append(slices.Clone(b), []byte(" {}")...),
		"unknown field":   bytes.Replace(b, []byte(`"version"`), []byte(`"extra":1,"version"`), 1),
		"wrong version":   bytes.Replace(b, []byte(broker.WireVersion), []byte("v0"), 1),
		"unknown scheme":  bytes.Replace(b, []byte(`"scheme":"basic"`), []byte(`"scheme":"digest"`), 1),
		"invalid content": bytes.Replace(b, []byte(`"port":443`), []byte(`"port":0`), 1),
		"empty":           nil,
	}
	for name, in := range tests {
		if _, err := broker.DecodeConfig(in); err == nil {
			t.Errorf("%s: DecodeConfig succeeded", name)
		}
	}
}

func TestPortsAndDestinations(t *testing.T) {
	c := brokertest.Config(t)
	if got, want := c.Ports(), []uint16{443, 8443}; !slices.Equal(got, want) {
		t.Errorf("Ports = %v, want %v", got, want)
	}
	want := []broker.Destination{brokertest.AnthropicDest, {brokertest.AnthropicDest.Host, 8443}, brokertest.OpenAIDest, brokertest.GitDest}
	if got := c.Destinations(); !slices.Equal(got, want) {
		t.Errorf("Destinations = %v, want %v", got, want)
	}
}

// TestGoldenEncoding pins the wire layout of Encode: the fields and their
// order, with the certificate, key and placeholders elided.
func TestGoldenEncoding(t *testing.T) {
	c := brokertest.Config(t)
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, cr := range c.Credentials {
		s = strings.ReplaceAll(s, cr.Placeholder, "PLACEHOLDER")
	}
	s = elideJSONString(elideJSONString(s, `"ca_der":"`), `"ca_key_pkcs8":"`)
	want, err := os.ReadFile("testdata/config.golden")
	if err != nil {
		t.Fatal(err)
	}
	if s != strings.TrimSpace(string(want)) {
		t.Errorf("encoding:\n%s\nwant:\n%s", s, want)
	}
}

// elideJSONString replaces the string after key with "...".
func elideJSONString(s, key string) string {
	i := strings.Index(s, key)
	if i < 0 {
		return s
	}
	start := i + len(key)
	end := start + strings.IndexByte(s[start:], '"')
	return s[:start] + "..." + s[end:]
}
