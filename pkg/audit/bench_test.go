package audit

import (
	"path/filepath"
	"testing"
)

// BenchmarkAppend measures one record: encoding, the locked write and the
// fsync, which dominates.
func BenchmarkAppend(b *testing.B) {
	w, err := Open(filepath.Join(b.TempDir(), "bench.audit"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := completed()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead measures reading and verifying a log of 1000 records.
func BenchmarkRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.audit")
	w, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range lifecycle() {
		for range 125 {
			if err := w.Append(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	w.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(path); err != nil {
			b.Fatal(err)
		}
	}
}
