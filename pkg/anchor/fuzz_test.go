package anchor

import (
	"bytes"
	"testing"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts
// re-encodes to the same bytes (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	for _, m := range []Message{&IDMapWritten{}, &Release{}, sampleReady(), &Released{Evidence: ReleaseEvidence(*sampleReady())},
		&Failure{Step: "s", Path: "/p", Errno: 2, Detail: "d"},
		&Setup{Version: 1, Lower: PathCheck{"/l", 1, 2}, Upper: PathCheck{"/u", 3, 4}, Work: PathCheck{"/w", 5, 6}, Merged: PathCheck{"/m", 7, 8}}} {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(m)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", m, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %x differs from input %x", again, b)
		}
	})
}
