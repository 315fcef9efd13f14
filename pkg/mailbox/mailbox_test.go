package mailbox

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

func testID(b byte) ids.RequestID {
	var id ids.RequestID
	for i := range id {
		id[i] = b + byte(i)
	}
	return id
}

func TestNameGolden(t *testing.T) {
	tests := []struct {
		name Name
		want string
	}{
		{Name{testID(0x10), KindRequest, 0}, "101112131415161718191a1b1c1d1e1f.request.00000000"},
		{Name{testID(0x10), KindCancellation, 0}, "101112131415161718191a1b1c1d1e1f.cancellation.00000000"},
		{Name{testID(0x10), KindAck, 7}, "101112131415161718191a1b1c1d1e1f.ack.00000007"},
		{Name{testID(0xa0), KindChunk, 0xdeadbeef}, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf.chunk.deadbeef"},
		{Name{testID(0xa0), KindResult, 0}, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf.result.00000000"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.name.String(); got != tt.want {
				t.Fatalf("String = %q, want %q", got, tt.want)
			}
			back, err := ParseName(tt.want)
			if err != nil || back != tt.name {
				t.Fatalf("ParseName = %+v, %v; want %+v", back, err, tt.name)
			}
		})
	}
}

func TestParseNameRefuses(t *testing.T) {
	for _, s := range []string{
		"",
		"101112131415161718191a1b1c1d1e1f.request",
		"101112131415161718191a1b1c1d1e1f.request.00000000.x",
		"101112131415161718191A1B1C1D1E1F.request.00000000",
		"101112131415161718191a1b1c1d1e.request.00000000",
		"00000000000000000000000000000000.request.00000000",
		"101112131415161718191a1b1c1d1e1f.shell.00000000",
		"101112131415161718191a1b1c1d1e1f.chunk.0000000A",
		"101112131415161718191a1b1c1d1e1f.chunk.000000001",
		"101112131415161718191a1b1c1d1e1f.chunk.+0000001",
		"101112131415161718191a1b1c1d1e1f.request.00000001",
		"101112131415161718191a1b1c1d1e1f.result.00000002",
		".tmp.101112131415161718191a1b1c1d1e1f.request.00000000.abcd",
	} {
		t.Run(s, func(t *testing.T) {
			if n, err := ParseName(s); !errors.Is(err, ErrName) {
				t.Fatalf("ParseName(%q) = %+v, %v; want ErrName", s, n, err)
			}
		})
	}
}

func newBox(t *testing.T) (string, *Dir, *Dir, *bytes.Buffer) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "mailbox")
	if err := Create(root, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	out, err := OpenDir(root, Outbox, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	in, err := OpenDir(root, Inbox, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return root, out, in, &logs
}

func record(kind protocol.RecordKind, payload string) protocol.SignedProtocolRecord {
	return protocol.SignedProtocolRecord{Kind: kind, PayloadBytes: []byte(payload)}
}

func TestWriteTake(t *testing.T) {
	root, out, _, _ := newBox(t)
	n := Name{testID(1), KindRequest, 0}
	rec := record(protocol.RecordMailboxRequest, "payload")
	if err := out.Write(n, &rec); err != nil {
		t.Fatal(err)
	}
	if err := out.Write(n, &rec); !errors.Is(err, ErrExists) {
		t.Fatalf("second Write = %v, want ErrExists", err)
	}
	raw, err := os.ReadFile(filepath.Join(root, OutboxDir, n.String()))
	if err != nil {
		t.Fatal(err)
	}
	// Golden envelope: variant 0, length 7, payload, 64 zero signature bytes.
	want := append([]byte{0x00, 0x07}, "payload"...)
	want = append(want, make([]byte, 64)...)
	if !bytes.Equal(raw, want) {
		t.Fatalf("file bytes %x, want %x", raw, want)
	}
	e, err := out.Take(n)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != n || string(e.Record.PayloadBytes) != "payload" || !bytes.Equal(e.Raw, want) {
		t.Fatalf("Take = %+v", e)
	}
	if _, err := out.Take(n); !errors.Is(err, ErrMissing) {
		t.Fatalf("Take after Take = %v, want ErrMissing", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, OutboxDir))
	if len(entries) != 0 {
		t.Fatalf("outbox still holds %v", entries)
	}
}

func TestWriteRefuses(t *testing.T) {
	_, out, in, _ := newBox(t)
	rec := record(protocol.RecordMailboxResult, "x")
	if err := out.Write(Name{testID(1), KindResult, 0}, &rec); !errors.Is(err, ErrName) {
		t.Errorf("result into outbox = %v, want ErrName", err)
	}
	if err := in.Write(Name{testID(1), KindChunk, 0}, &rec); !errors.Is(err, ErrRecord) {
		t.Errorf("result record under a chunk name = %v, want ErrRecord", err)
	}
	if err := in.WriteBytes("x", make([]byte, MaxFileBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized write = %v, want ErrTooLarge", err)
	}
}

func TestReadRefusesSpecialFiles(t *testing.T) {
	root, out, _, _ := newBox(t)
	dir := filepath.Join(root, OutboxDir)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte{0x00, 0x01, 0x61}, 0o600)
	tests := []struct {
		name   string
		create func(path string) error
		err    error
	}{
		{"symbolic link", func(p string) error { return os.Symlink(secret, p) }, ErrNotRegular},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, ErrNotRegular},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, ErrNotRegular},
		{"too large", func(p string) error { return os.WriteFile(p, make([]byte, MaxFileBytes+1), 0o600) }, ErrTooLarge},
		{"garbage", func(p string) error { return os.WriteFile(p, []byte("garbage"), 0o600) }, ErrRecord},
		{"kind differs from name", func(p string) error {
			return os.WriteFile(p, append([]byte{0x01, 0x01, 0x61}, make([]byte, 64)...), 0o600)
		}, ErrRecord},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Name{testID(byte(0x10 * (i + 1))), KindRequest, 0}
			if err := tt.create(filepath.Join(dir, n.String())); err != nil {
				t.Fatal(err)
			}
			if _, err := out.Read(n); !errors.Is(err, tt.err) {
				t.Fatalf("Read = %v, want %v", err, tt.err)
			}
		})
	}
	if b, _ := os.ReadFile(secret); len(b) != 3 {
		t.Fatal("the symbolic link's target changed")
	}
}

func TestDrainDiscardsUnexpectedFiles(t *testing.T) {
	root, out, _, logs := newBox(t)
	dir := filepath.Join(root, OutboxDir)
	good := Name{testID(2), KindRequest, 0}
	rec := record(protocol.RecordMailboxRequest, "ok")
	out.Write(good, &rec)
	cancel := Name{testID(2), KindCancellation, 0}
	crec := record(protocol.RecordMailboxCancellation, "c")
	out.Write(cancel, &crec)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, Name{testID(3), KindChunk, 0}.String()), []byte("x"), 0o600)
	os.Symlink("/etc/passwd", filepath.Join(dir, Name{testID(4), KindRequest, 0}.String()))
	os.WriteFile(filepath.Join(dir, TempPrefix+"in-progress"), []byte("x"), 0o600)
	stale := filepath.Join(dir, TempPrefix+"abandoned")
	os.WriteFile(stale, []byte("x"), 0o600)
	old := time.Now().Add(-2 * StaleTemp)
	os.Chtimes(stale, old, old)

	var got []Name
	if err := out.Drain(func(e Entry) { got = append(got, e.Name) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != good || got[1] != cancel {
		t.Fatalf("handled %v, want the request then its cancellation", got)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || left[0].Name() != TempPrefix+"in-progress" {
		t.Fatalf("left in the outbox: %v, want only the fresh temporary file", left)
	}
	for _, want := range []string{"notes.txt", "chunk files do not belong in the outbox", "not a regular file", "abandoned"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks a reason mentioning %q:\n%s", want, logs)
		}
	}
	if _, err := os.Lstat("/etc/passwd"); err != nil {
		t.Fatal("the symbolic link's target is gone")
	}
}

func TestOpenDirRefusesSymlink(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := Create(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	if _, err := OpenDir(link, Outbox, nil); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("OpenDir through a symbolic link = %v, want ErrNotRegular", err)
	}
	if err := Create(link, 0o755); err == nil {
		t.Fatal("Create through a symbolic link succeeded")
	}
}

func TestServeWakesOnArrival(t *testing.T) {
	_, out, _, _ := newBox(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Name, 1)
	done := make(chan error, 1)
	go func() { done <- out.Serve(ctx, time.Hour, func(e Entry) { got <- e.Name }) }()
	time.Sleep(50 * time.Millisecond)
	n := Name{testID(5), KindAck, 3}
	rec := record(protocol.RecordMailboxResultAck, "a")
	start := time.Now()
	if err := out.Write(n, &rec); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g != n {
			t.Fatalf("served %v, want %v", g, n)
		}
		t.Logf("served %v after %v", g, time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not notice the new file (inotify) before the hour-long rescan")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve = %v, want context.Canceled", err)
	}
}
