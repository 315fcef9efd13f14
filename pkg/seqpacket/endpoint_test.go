package seqpacket

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

var errTooLarge = errors.New("too large")

type malformed struct{ err error }

func (m *malformed) Error() string { return "malformed: " + m.err.Error() }
func (m *malformed) Unwrap() error { return m.err }

// textProtocol carries commands and reports as short strings; a report
// must start with "r:".
var textProtocol = &Protocol[string, string]{
	Name: "test message", Max: 8, TooLarge: errTooLarge,
	Malformed:     func(err error) error { return &malformed{err} },
	EncodeCommand: func(s string) []byte { return []byte(s) },
	DecodeCommand: func(b []byte) (string, error) { return string(b), nil },
	EncodeReport:  func(s string) []byte { return []byte("r:" + s) },
	DecodeReport: func(b []byte) (string, error) {
		s, ok := strings.CutPrefix(string(b), "r:")
		if !ok {
			return "", fmt.Errorf("report %q lacks its prefix", b)
		}
		return s, nil
	},
}

func TestEndpoint(t *testing.T) {
	a, f, err := PairEndpoints(textProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewEndpoint(f, textProtocol)
	if err != nil {
		t.Fatal(err)
	}
	var m *malformed
	steps := []struct {
		name string
		run  func() error
	}{
		{"command", func() error {
			if err := a.SendCommand("go"); err != nil {
				return err
			}
			if got, err := b.RecvCommand(); err != nil || got != "go" {
				return fmt.Errorf("RecvCommand = %q, %v", got, err)
			}
			return nil
		}},
		{"report", func() error {
			if err := b.SendReport("ok"); err != nil {
				return err
			}
			if got, err := a.RecvReport(); err != nil || got != "ok" {
				return fmt.Errorf("RecvReport = %q, %v", got, err)
			}
			return nil
		}},
		{"over Max is not sent", func() error {
			if err := a.SendCommand("123456789"); !errors.Is(err, errTooLarge) {
				return fmt.Errorf("SendCommand of 9 bytes = %v, want errTooLarge", err)
			}
			return nil
		}},
		{"undecodable is malformed and the channel stays usable", func() error {
			if err := a.SendCommand("nope"); err != nil {
				return err
			}
			if _, err := b.RecvReport(); !errors.As(err, &m) {
				return fmt.Errorf("RecvReport of a command = %v, want malformed", err)
			}
			if err := b.SendReport("x"); err != nil {
				return err
			}
			if got, err := a.RecvReport(); err != nil || got != "x" {
				return fmt.Errorf("RecvReport after a malformed packet = %q, %v", got, err)
			}
			return nil
		}},
		{"a packet over Max is malformed, not cut", func() error {
			if err := a.c.Send([]byte("0123456789")); err != nil {
				return err
			}
			if _, err := b.RecvCommand(); !errors.As(err, &m) || !errors.Is(err, ErrTruncated) {
				return fmt.Errorf("RecvCommand of 10 bytes = %v, want malformed ErrTruncated", err)
			}
			return nil
		}},
		{"the peer's close is io.EOF", func() error {
			a.Close()
			if _, err := b.RecvCommand(); !errors.Is(err, io.EOF) {
				return fmt.Errorf("RecvCommand after close = %v, want io.EOF", err)
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}
