package audit

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRead feeds arbitrary file contents to the reader. It must never
// panic; every refusal is a *LineError of a known class naming a line; the
// records it returns, re-encoded with their chain, reproduce the bytes they
// came from exactly (only canonical lines are accepted).
func FuzzRead(f *testing.F) {
	var whole []byte
	var prev [32]byte
	for _, r := range lifecycle() {
		r.Prev = prev
		b, err := r.encode()
		if err != nil {
			f.Fatal(err)
		}
		whole = append(append(whole, b...), '\n')
		prev = hash(b)
	}
	f.Add(whole)
	f.Add(whole[:len(whole)-1])
	f.Add(whole[:len(whole)/2])
	f.Add(bytes.Replace(whole, []byte("build"), []byte("bujld"), 1))
	f.Add([]byte{})
	f.Add([]byte("\n"))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, last, err := parse("fuzz.audit", data)
		var want []byte
		var chain [32]byte
		for _, r := range recs {
			if r.Prev != chain {
				t.Fatalf("record with prev %v accepted after chain value %x", r.Prev, chain)
			}
			b, eerr := r.encode()
			if eerr != nil {
				t.Fatalf("accepted record does not encode: %v", eerr)
			}
			want = append(append(want, b...), '\n')
			chain = hash(b)
		}
		if last != chain {
			t.Fatalf("parse reported chain value %v, records end at %x", last, chain)
		}
		if !bytes.HasPrefix(data, want) {
			t.Fatal("accepted records do not re-encode to the bytes they came from")
		}
		if err == nil {
			if len(want) != len(data) {
				t.Fatalf("no error, but %d of %d bytes were accepted", len(want), len(data))
			}
			return
		}
		var le *LineError
		if !errors.As(err, &le) || le.Line != len(recs)+1 || le.Path != "fuzz.audit" {
			t.Fatalf("error %v does not name line %d", err, len(recs)+1)
		}
		if !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrChainBroken) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("error %v has no known class", err)
		}
	})
}
