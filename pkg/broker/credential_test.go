package broker_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"lazaret.dev/pkg/broker"
	"lazaret.dev/pkg/broker/brokertest"
)

func TestSchemeRoundTrip(t *testing.T) {
	for _, s := range []broker.Scheme{broker.SchemeBearer, broker.SchemeHeader, broker.SchemeBasic} {
		got, err := broker.ParseScheme(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScheme(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	if _, err := broker.ParseScheme("Bearer"); !errors.Is(err, broker.ErrUnknownScheme) {
		t.Errorf("ParseScheme(%q) error = %v, want ErrUnknownScheme", "Bearer", err)
	}
}

func TestCheckValue(t *testing.T) {
	secret := "s3cr3t-VALUE"
	tests := []struct {
		name string
		v    string
		want error
	}{
		{"ok", secret, nil},
		{"empty", "", broker.ErrEmptyValue},
		{"long", strings.Repeat("a", broker.MaxValueLen+1), broker.ErrLongValue},
		{"space", secret + " x", broker.ErrValueByte},
		{"newline", secret + "\n", broker.ErrValueByte},
		{"del", secret + "\x7f", broker.ErrValueByte},
		{"utf8", secret + "é", broker.ErrValueByte},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := broker.CheckValue(tt.v)
			if !errors.Is(err, tt.want) {
				t.Fatalf("CheckValue = %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("error %q contains the value", err)
			}
		})
	}
}

func TestNewPlaceholder(t *testing.T) {
	tests := []struct {
		v, prefix string
	}{
		{brokertest.AnthropicValue, "sk-ant-api03-"},
		{brokertest.OpenAIValue, "sk-proj-"},
		{brokertest.GitValue, "ghp_"},
		{"AKIAIOSFODNN7EXAMPLEwJalrXUtnFEMI", ""},
		{"abc.DEF.123.ghi.JKL.456.mno.PQR.789", ""},
	}
	r := brokertest.Rand(3)
	for _, tt := range tests {
		p, err := broker.NewPlaceholder(tt.v, r)
		if err != nil {
			t.Fatalf("NewPlaceholder(%d-byte value): %v", len(tt.v), err)
		}
		if p == tt.v || len(p) != len(tt.v) || !strings.HasPrefix(p, tt.prefix) {
			t.Errorf("placeholder %q of %q: want a different value of the same length with prefix %q", p, tt.v, tt.prefix)
		}
		for i := range len(p) {
			if broker.CharClass(p[i]) != broker.CharClass(tt.v[i]) || broker.CharClass(p[i]) == 0 && p[i] != tt.v[i] {
				t.Errorf("placeholder %q of %q differs in class at byte %d", p, tt.v, i)
			}
		}
		if q, _ := broker.NewPlaceholder(tt.v, r); q == p {
			t.Errorf("two placeholders of %q are both %q", tt.v, p)
		}
	}
}

func TestNewPlaceholderShort(t *testing.T) {
	// 13 letters carry 61 bits; 14 carry 65.
	for _, v := range []string{"sk-ant-api03-abcdefghijklm", "0123456789012345678", "sk-........................"} {
		_, err := broker.NewPlaceholder(v, brokertest.Rand(4))
		if !errors.Is(err, broker.ErrShortValue) {
			t.Errorf("NewPlaceholder(%q) error = %v, want ErrShortValue", v, err)
		}
		if err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("error %q contains the value", err)
		}
	}
	if _, err := broker.NewPlaceholder("sk-ant-api03-abcdefghijklmn", brokertest.Rand(4)); err != nil {
		t.Errorf("14 random letters: %v", err)
	}
}

func TestCredentialRedacted(t *testing.T) {
	c := brokertest.Config(t)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for _, arg := range []any{c.Credentials[0], &c.Credentials[0], c.Credentials, *c, c, c.Authority} {
			out := fmt.Sprintf(verb, arg)
			for _, cr := range c.Credentials {
				if strings.Contains(out, cr.Value) || strings.Contains(out, cr.Placeholder) {
					t.Errorf("Sprintf(%q, %T) shows a value or placeholder: %s", verb, arg, out)
				}
			}
			if !bytes.Contains([]byte(out), []byte("ANTHROPIC_API_KEY")) && arg != any(c.Authority) {
				t.Errorf("Sprintf(%q, %T) = %s, want the credential name", verb, arg, out)
			}
		}
	}
}
