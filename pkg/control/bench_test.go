package control

import (
	"bytes"
	"context"
	"io"
	"testing"

	"lazaret.dev/pkg/protocol"
)

func BenchmarkExecuteRoundTrip(b *testing.B) {
	g := newGeneration(b)
	h := startServer(b, g, g.config(b, &fakeSessions{}))
	c, binding := h.enrolled(b)
	ctx := context.Background()
	var out, errb bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Execute(ctx, binding.SessionID, []string{"true"}, &out, &errb); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInteractiveThroughput(b *testing.B) {
	g := newGeneration(b)
	h := startServer(b, g, g.config(b, &fakeSessions{}))
	c, binding := h.enrolled(b)
	s, err := c.Interactive(context.Background(), protocol.InteractiveSessionRequest{SessionID: binding.SessionID, Argv: []string{"sh"},
		InitialSize: protocol.TerminalResize{SessionID: binding.SessionID, Rows: 24, Columns: 80}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	chunk := bytes.Repeat([]byte("y"), 32<<10)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	received := make(chan error, 1)
	sent := make(chan int64, 1)
	go func() {
		// Input is echoed; count it back.
		var got int64
		for {
			batch, err := s.Recv()
			if err != nil {
				received <- err
				return
			}
			for _, m := range batch.Messages {
				if m.Terminal != nil && m.Terminal.Kind == protocol.MessageOutput {
					got += int64(len(m.Terminal.Output.Bytes))
				}
				if m.Terminal != nil && m.Terminal.Kind == protocol.MessageExit {
					if got != <-sent {
						received <- io.ErrShortWrite
						return
					}
					received <- nil
					return
				}
			}
		}
	}()
	var want int64
	for b.Loop() {
		if err := s.Input(chunk); err != nil {
			b.Fatal(err)
		}
		want += int64(len(chunk))
	}
	sent <- want
	if err := s.Hangup(); err != nil {
		b.Fatal(err)
	}
	if err := <-received; err != nil {
		b.Fatal(err)
	}
}
