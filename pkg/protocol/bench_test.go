package protocol

import (
	"testing"

	"lazaret.dev/pkg/postcard"
)

type benchRecord struct {
	name  string
	rec   SignedRecord
	fresh func() Record
	key   PrivateKey
}

func benchRecords(b *testing.B) (*fixture, []benchRecord) {
	f := newFixture(b)
	chunk := f.chunk(0, StreamStdout, make([]byte, MaxChunkBytes))
	return f, []benchRecord{
		{"MailboxRequest", &f.request, func() Record { return new(MailboxRequest) }, sandboxKey},
		{"MailboxResultChunk64KiB", &chunk, func() Record { return new(MailboxResultChunk) }, coordinatorKey},
	}
}

func BenchmarkEncode(b *testing.B) {
	_, recs := benchRecords(b)
	for _, r := range recs {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			n := len(postcard.Marshal(r.rec))
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := Encode(r.rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	_, recs := benchRecords(b)
	for _, r := range recs {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			enc := postcard.Marshal(r.rec)
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if err := Decode(enc, r.fresh()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSign(b *testing.B) {
	_, recs := benchRecords(b)
	for _, r := range recs {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(postcard.Marshal(r.rec))))
			for b.Loop() {
				if _, err := Sign(r.key, r.rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerify runs the receiver's complete check: signature, decode,
// and the record's chain (for the request: capability and registered
// binding; the replay guard is fresh each time so the request stays new).
func BenchmarkVerify(b *testing.B) {
	f, recs := benchRecords(b)
	for _, r := range recs {
		signed, err := Sign(r.key, r.rec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(signed.PayloadBytes)))
			for b.Loop() {
				var err error
				switch r.rec.(type) {
				case *MailboxRequest:
					_, err = f.verifier.VerifyRequest(&signed, f.sessions, NewReplayGuard(1))
				case *MailboxResultChunk:
					_, err = f.verifier.VerifyResultChunk(&signed, &f.pending)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
