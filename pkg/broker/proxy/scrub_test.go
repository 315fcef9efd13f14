package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"lazaret.dev/pkg/broker/brokertest"

	"lazaret.dev/pkg/broker"
)

// chunkReader returns at most the next size bytes per Read, sizes drawn at
// random.
type chunkReader struct {
	b   []byte
	rnd *rand.Rand
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), 1+r.rnd.IntN(97))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// scrubInput builds a body holding the values, their prefixes and
// near-misses, in many alignments.
func scrubInput(c *broker.Config, rnd *rand.Rand) string {
	var b strings.Builder
	for range 200 {
		v := c.Credentials[rnd.IntN(len(c.Credentials))].Value
		switch rnd.IntN(4) {
		case 0:
			b.WriteString(v)
		case 1:
			b.WriteString(v[:rnd.IntN(len(v))])
		case 2:
			b.WriteString(v[:len(v)-1] + "#")
		default:
			b.WriteString(strings.Repeat("z", rnd.IntN(80)))
		}
	}
	return b.String()
}

func TestScrubBodyAcrossReads(t *testing.T) {
	c := brokertest.Config(t)
	s := newScrubber(c.Credentials)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		in := scrubInput(c, rnd)
		want := in
		for _, cr := range c.Credentials {
			want = strings.ReplaceAll(want, cr.Value, cr.Placeholder)
		}
		readers := map[string]io.Reader{
			"random chunks": &chunkReader{b: []byte(in), rnd: rnd},
			"one byte":      iotest.OneByteReader(strings.NewReader(in)),
			"whole":         strings.NewReader(in),
		}
		for name, r := range readers {
			eof := false
			body := s.body(io.NopCloser(r), func() { eof = true })
			var got []byte
			var err error
			if i%2 == 0 {
				got, err = io.ReadAll(iotest.OneByteReader(body))
			} else {
				got, err = io.ReadAll(body)
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("input %d, %s: scrubbed body differs from the expected (%d vs %d bytes)", i, name, len(got), len(want))
			}
			if !eof {
				t.Errorf("input %d, %s: end of body not reported", i, name)
			}
		}
	}
}

// TestScrubBodyPassesEvents checks that the scrubber passes on data that
// cannot begin a value without waiting for more, so a server-sent event is
// not held back.
func TestScrubBodyPassesEvents(t *testing.T) {
	c := brokertest.Config(t)
	s := newScrubber(c.Credentials)
	pr, pw := io.Pipe()
	body := s.body(pr, nil)
	v := c.Credentials[0].Value
	go func() {
		pw.Write([]byte("data: one\n\n"))
		pw.Write([]byte("data: " + v[:10]))
		pw.Write([]byte(v[10:] + "\n\n"))
	}()
	buf := make([]byte, 1024)
	n, err := body.Read(buf)
	if err != nil || string(buf[:n]) != "data: one\n\n" {
		t.Fatalf("first read = %q, %v; want the whole first event", buf[:n], err)
	}
	n, err = body.Read(buf)
	if err != nil || string(buf[:n]) != "data: " {
		t.Fatalf("second read = %q, %v; want only the bytes before a possible value", buf[:n], err)
	}
	n, err = body.Read(buf)
	if want := c.Credentials[0].Placeholder + "\n\n"; err != nil || string(buf[:n]) != want {
		t.Fatalf("third read = %q, %v; want the placeholder", buf[:n], err)
	}
	pw.Close()
}

func TestScrubHeader(t *testing.T) {
	c := brokertest.Config(t)
	s := newScrubber(c.Credentials)
	v, p := c.Credentials[1].Value, c.Credentials[1].Placeholder
	h := http.Header{"X-Echo": {"Bearer " + v, "none"}, "Www-Authenticate": {v + "," + v}}
	s.header(h)
	if h.Get("X-Echo") != "Bearer "+p || h["X-Echo"][1] != "none" || h.Get("Www-Authenticate") != p+","+p {
		t.Errorf("scrubbed header %v", h)
	}
	if bytes.Contains([]byte(strings.Join(h["X-Echo"], "")), []byte(v)) {
		t.Error("value left in header")
	}
}
