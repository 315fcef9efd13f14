package proxy

import (
	"math/rand/v2"
	"testing"
	"time"

	"lazaret.dev/pkg/broker"
)

// Fixture destinations: one host per credential, and one brokered host
// that no credential other than ANTHROPIC_API_KEY's second destination
// names.
var (
	anthropicDest = broker.Destination{Host: "api.anthropic.example", Port: 443}
	openaiDest    = broker.Destination{Host: "api.openai.example", Port: 443}
	gitDest       = broker.Destination{Host: "git.example", Port: 443}
	otherDest     = broker.Destination{Host: "other.example", Port: 443}
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
func testConfig(tb testing.TB) *broker.Config {
	tb.Helper()
	a, err := broker.NewAuthority("test", fixtureHosts, time.Now(), testRand(1))
	if err != nil {
		tb.Fatal(err)
	}
	c := &broker.Config{Authority: a, Credentials: []broker.Credential{
		{Name: "ANTHROPIC_API_KEY", Scheme: broker.SchemeHeader, Header: "x-api-key",
			Destinations: []broker.Destination{anthropicDest, {Host: anthropicDest.Host, Port: 8443}}, Value: anthropicValue},
		{Name: "OPENAI_API_KEY", Scheme: broker.SchemeBearer, Destinations: []broker.Destination{openaiDest}, Value: openaiValue},
		{Name: "GIT_TOKEN", Scheme: broker.SchemeBasic, Destinations: []broker.Destination{gitDest}, Value: gitValue},
	}}
	r := testRand(2)
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

// cred returns the fixture credential called name.
func cred(c *broker.Config, name string) *broker.Credential {
	for i := range c.Credentials {
		if c.Credentials[i].Name == name {
			return &c.Credentials[i]
		}
	}
	panic("no credential " + name)
}
