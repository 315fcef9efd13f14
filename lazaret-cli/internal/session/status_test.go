package session

import (
	"os"
	"path/filepath"
	"testing"

	"lazaret.dev/pkg/ids"
)

func TestParseLockLine(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		want lockKey
	}{
		{"1: FLOCK  ADVISORY  WRITE 4242 00:2a:123456 0 EOF", true, lockKey{0, 0x2a, 123456}},
		{"2: POSIX  ADVISORY  WRITE 4242 08:01:77 0 EOF", false, lockKey{}},
		{"3: -> FLOCK  ADVISORY  WRITE 4243 00:2a:123456 0 EOF", false, lockKey{}},
		{"garbage", false, lockKey{}},
		{"1: FLOCK  ADVISORY  WRITE 4242 zz:2a:1 0 EOF", false, lockKey{}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, ok := parseLockLine(tt.line)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("parseLockLine = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseLockLine(f *testing.F) {
	f.Add("1: FLOCK  ADVISORY  WRITE 4242 00:2a:123456 0 EOF")
	f.Fuzz(func(t *testing.T, s string) { parseLockLine(s) })
}

func TestStatusLock(t *testing.T) {
	f := newFixture(t)
	if err := domainDir(f.target.Paths().Dir); err != nil {
		t.Fatal(err)
	}
	// A directory that is not a Domain is ignored.
	if err := os.Mkdir(filepath.Join(f.target.RuntimeRoot, "domains", "not-a-domain"), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLock(f.target.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, held := range []bool{false, true} {
		if held {
			if ok, err := l.TryLock(); !ok || err != nil {
				t.Fatal("lock", err)
			}
		}
		st, err := Status(f.target.RuntimeRoot, f.target.StorageRoot)
		if err != nil {
			t.Fatal(err)
		}
		want := LockFree
		if held {
			want = LockHeld
		}
		if len(st) != 1 || st[0].DomainID != f.target.DomainID.String() || st[0].Lock != want || st[0].Store != StoreMissing || st[0].Published != nil {
			t.Fatalf("held=%v: status %+v", held, st)
		}
	}
	if _, err := parseDomain(ids.DomainID{}.String()); err != nil {
		t.Fatal(err)
	}
}
