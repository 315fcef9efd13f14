package broker

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Fixture destinations: one host per credential, and one brokered host
// that no credential other than ANTHROPIC_API_KEY's second destination
// names.
var (
	anthropicDest = Destination{"api.anthropic.example", 443}
	openaiDest    = Destination{"api.openai.example", 443}
	gitDest       = Destination{"git.example", 443}
	otherDest     = Destination{"other.example", 443}
	fixtureHosts  = []string{anthropicDest.Host, openaiDest.Host, gitDest.Host, otherDest.Host}
)

// Fixture real values.
const (
	anthropicValue = "sk-ant-api03-Xq7rT2mLp9vB4nK8sW1zY6cF3hJ5dG0aE-eR7uI2oP4lKjHgFdSa9Qw_x"
	openaiValue    = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdEFGH"
	gitValue       = "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"
)

// testRand returns a deterministic random source.
func testRand(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0] = byte(seed)
	return rand.NewChaCha8(s)
}

// testConfig returns a valid configuration with one credential per scheme:
// ANTHROPIC_API_KEY (x-api-key header, two destinations), OPENAI_API_KEY
// (bearer) and GIT_TOKEN (basic).
func testConfig(tb testing.TB) *Config {
	tb.Helper()
	a, err := NewAuthority("test", fixtureHosts, time.Now(), testRand(1))
	if err != nil {
		tb.Fatal(err)
	}
	c := &Config{Authority: a, Credentials: []Credential{
		{Name: "ANTHROPIC_API_KEY", Scheme: SchemeHeader, Header: "x-api-key",
			Destinations: []Destination{anthropicDest, {anthropicDest.Host, 8443}}, Value: anthropicValue},
		{Name: "OPENAI_API_KEY", Scheme: SchemeBearer, Destinations: []Destination{openaiDest}, Value: openaiValue},
		{Name: "GIT_TOKEN", Scheme: SchemeBasic, Destinations: []Destination{gitDest}, Value: gitValue},
	}}
	r := testRand(2)
	for i := range c.Credentials {
		p, err := NewPlaceholder(c.Credentials[i].Value, r)
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

// cred returns the fixture credential called name.
func cred(c *Config, name string) *Credential {
	for i := range c.Credentials {
		if c.Credentials[i].Name == name {
			return &c.Credentials[i]
		}
	}
	panic("no credential " + name)
}
