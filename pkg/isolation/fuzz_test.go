package isolation

import (
	"bytes"
	"testing"
)

// FuzzParseKeep checks that whatever ParseKeep accepts encodes back to the
// same bytes (the layout is canonical).
func FuzzParseKeep(f *testing.F) {
	f.Add([]byte(keepHeader + ".env\x00build/\x00"))
	f.Add([]byte(keepHeader))
	f.Add([]byte(keepHeader + "a\x00a/\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseKeep(data)
		if err != nil {
			return
		}
		if got := EncodeKeep(s); !bytes.Equal(got, data) {
			t.Fatalf("ParseKeep accepted %q, which encodes back as %q", data, got)
		}
	})
}

// FuzzParseReport checks the same of reports.
func FuzzParseReport(f *testing.F) {
	f.Add([]byte(reportHeader + "k.env\x00ibuild/\x00"))
	f.Add([]byte(reportHeader + "x\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseReport(data)
		if err != nil {
			return
		}
		got, err := EncodeReport(rs)
		if err != nil {
			t.Fatalf("ParseReport accepted %q, which does not encode: %v", data, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("ParseReport accepted %q, which encodes back as %q", data, got)
		}
	})
}
