// Package brokertest is the credential broker's test fixture, shared by
// the tests of pkg/broker and pkg/broker/proxy: four brokered hosts, three
// credentials (one per scheme) with fixed values, and a valid
// configuration with deterministic placeholders. It is for tests only.
package brokertest

import (
	"math/rand/v2"
	"testing"
	"time"

	"lazaret.dev/pkg/broker"
)

// The fixture destinations: one host per credential, and one brokered host
// that no credential other than ANTHROPIC_API_KEY's second destination
// names.
var (
	AnthropicDest = broker.Destination{Host: "api.anthropic.example", Port: 443}
	OpenAIDest    = broker.Destination{Host: "api.openai.example", Port: 443}
	GitDest       = broker.Destination{Host: "git.example", Port: 443}
	OtherDest     = broker.Destination{Host: "other.example", Port: 443}
	Hosts         = []string{AnthropicDest.Host, OpenAIDest.Host, GitDest.Host, OtherDest.Host}
)

// The fixture real values.
const (
	AnthropicValue = "sk-ant-api03-Xq7rT2mLp9vB4nK8sW1zY6cF3hJ5dG0aE-eR7uI2oP4lKjHgFdSa9Qw_x"
	OpenAIValue    = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdEFGH"
	GitValue       = "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"
)

// Rand returns a deterministic random source.
func Rand(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0] = byte(seed)
	return rand.NewChaCha8(s)
}

// Config returns a valid configuration with one credential per scheme:
// ANTHROPIC_API_KEY (x-api-key header, two destinations), OPENAI_API_KEY
// (bearer) and GIT_TOKEN (basic).
func Config(tb testing.TB) *broker.Config {
	tb.Helper()
	a, err := broker.NewAuthority("test", Hosts, time.Now(), Rand(1))
	if err != nil {
		tb.Fatal(err)
	}
	c := &broker.Config{Authority: a, Credentials: []broker.Credential{
		{Name: "ANTHROPIC_API_KEY", Scheme: broker.SchemeHeader, Header: "x-api-key",
			Destinations: []broker.Destination{AnthropicDest, {Host: AnthropicDest.Host, Port: 8443}}, Value: AnthropicValue},
		{Name: "OPENAI_API_KEY", Scheme: broker.SchemeBearer, Destinations: []broker.Destination{OpenAIDest}, Value: OpenAIValue},
		{Name: "GIT_TOKEN", Scheme: broker.SchemeBasic, Destinations: []broker.Destination{GitDest}, Value: GitValue},
	}}
	r := Rand(2)
	for i := range c.Credentials {
		p, err := broker.NewPlaceholder(c.Credentials[i].Value, r)
		if err != nil {
			tb.Fatal(err)
		}
		c.Credentials[i].Placeholder = p
	}
	if err := c.Validate(); err != nil {
		tb.Fatal(err)
	}
	return c
}

// Cred returns the fixture credential called name.
func Cred(c *broker.Config, name string) *broker.Credential {
	for i := range c.Credentials {
		if c.Credentials[i].Name == name {
			return &c.Credentials[i]
		}
	}
	panic("no credential " + name)
}
