package proxy

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"

	"lazaret.dev/pkg/broker"
)

// scrubber swaps real values back for placeholders: in response headers and
// in a response body streamed through it. Every value and its placeholder
// have the same length, so the body's length does not change.
type scrubber struct {
	olds, news [][]byte
	maxLen     int
}

// newScrubber returns a scrubber for the credentials' values.
func newScrubber(creds []broker.Credential) *scrubber {
	s := &scrubber{}
	for _, c := range creds {
		s.olds = append(s.olds, []byte(c.Value))
		s.news = append(s.news, []byte(c.Placeholder))
		s.maxLen = max(s.maxLen, len(c.Value))
	}
	return s
}

// with returns a scrubber that also replaces old[i] by new[i]; each pair
// must have the same length.
func (s *scrubber) with(old, new []string) *scrubber {
	if len(old) == 0 {
		return s
	}
	w := &scrubber{olds: slices.Clone(s.olds), news: slices.Clone(s.news), maxLen: s.maxLen}
	for i := range old {
		w.olds = append(w.olds, []byte(old[i]))
		w.news = append(w.news, []byte(new[i]))
		w.maxLen = max(w.maxLen, len(old[i]))
	}
	return w
}

// basicEchoes returns, for each Authorization value Rewrite turned from
// "Basic base64(<user>:<placeholder>)" into "Basic base64(<user>:<value>)",
// the new base64 and the placeholder's form re-encoded to the same length,
// so an upstream echoing the encoded credentials is scrubbed too.
func basicEchoes(before, after []string) (olds, news []string) {
	for i := range min(len(before), len(after)) {
		if before[i] == after[i] {
			continue
		}
		d, ok := decodeBasic(before[i])
		if !ok {
			continue
		}
		if enc := base64.StdEncoding.EncodeToString([]byte(d)); len(enc) == len(after[i])-6 {
			olds = append(olds, after[i][6:])
			news = append(news, enc)
		}
	}
	return olds, news
}

// header replaces every value in h's values in place.
func (s *scrubber) header(h http.Header) {
	for _, vs := range h {
		for i, v := range vs {
			for j, old := range s.olds {
				if strings.Contains(v, string(old)) {
					v = strings.ReplaceAll(v, string(old), string(s.news[j]))
				}
			}
			vs[i] = v
		}
	}
}

// replace replaces every value in b in place.
func (s *scrubber) replace(b []byte) {
	for j, old := range s.olds {
		for off := 0; ; {
			i := bytes.Index(b[off:], old)
			if i < 0 {
				break
			}
			copy(b[off+i:], s.news[j])
			off += i + len(old)
		}
	}
}

// held returns how many bytes at the end of b could begin a value, and so
// must wait for the next read before they are passed on.
func (s *scrubber) held(b []byte) int {
	if s.maxLen < 2 {
		return 0
	}
	tail := b[max(0, len(b)-(s.maxLen-1)):]
	hold := 0
	for _, old := range s.olds {
		t := tail[max(0, len(tail)-(len(old)-1)):]
		for i := 0; i < len(t); i++ {
			j := bytes.IndexByte(t[i:], old[0])
			if j < 0 {
				break
			}
			i += j
			if bytes.HasPrefix(old, t[i:]) {
				hold = max(hold, len(t)-i)
				break
			}
		}
	}
	return hold
}

// scrubBody is a response body with every value replaced by its
// placeholder. It passes data on as soon as it is sure no value starts in
// it, holding back at most the longest value's length less one byte.
type scrubBody struct {
	s     *scrubber
	r     io.ReadCloser
	buf   []byte
	end   int // buf[:end] is data read and scrubbed
	cut   int // buf[:cut] has been made ready; buf[cut:end] is held back
	ready []byte
	err   error
	atEOF func()
}

// bodyChunk is how much scrubBody reads from upstream at once.
const bodyChunk = 32 << 10

// body returns r scrubbed; atEOF, if not nil, runs once r is exhausted.
func (s *scrubber) body(r io.ReadCloser, atEOF func()) io.ReadCloser {
	return &scrubBody{s: s, r: r, buf: make([]byte, bodyChunk+s.maxLen), atEOF: atEOF}
}

// Read passes on scrubbed data.
func (b *scrubBody) Read(p []byte) (int, error) {
	for len(b.ready) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.fill()
	}
	n := copy(p, b.ready)
	b.ready = b.ready[n:]
	return n, nil
}

// fill reads once from upstream and makes ready what can be passed on. It
// is called only when everything made ready before has been passed on.
func (b *scrubBody) fill() {
	b.end = copy(b.buf, b.buf[b.cut:b.end])
	n, err := b.r.Read(b.buf[b.end:])
	b.end += n
	b.s.replace(b.buf[:b.end])
	if err != nil {
		b.err = err
		b.cut = b.end
		b.ready = b.buf[:b.end]
		if err == io.EOF && b.atEOF != nil {
			b.atEOF()
		}
		return
	}
	b.cut = b.end - b.s.held(b.buf[:b.end])
	b.ready = b.buf[:b.cut]
}

// Close closes the upstream body.
func (b *scrubBody) Close() error {
	return b.r.Close()
}
