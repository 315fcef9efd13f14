package idmap

import (
	"encoding/hex"
	"errors"
	"testing"
)

func TestEncodeGolden(t *testing.T) {
	m := Single(1000, 1001)
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	const want = "6c617a617265742d69642d6d61702d763100" + // domain and NUL
		"00000001" + "00000000" + "000003e8" + "00000001" + // uid 0 -> 1000 x1
		"00000001" + "00000000" + "000003e9" + "00000001" // gid 0 -> 1001 x1
	if got := hex.EncodeToString(enc); got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	d, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	const wantDigest = "2156a9602a26a874bda71b268c4f8f5c6f88fe13f3f1450e8eac7739a3a08787"
	if d.String() != wantDigest {
		t.Fatalf("digest %s, want %s", d, wantDigest)
	}
}

func TestCanonicalMerge(t *testing.T) {
	a := Map{
		UIDs: []Range{{1, 100001, 65535}, {0, 1000, 1}},
		GIDs: []Range{{0, 1000, 1}, {1, 100001, 10}, {11, 100011, 65525}},
	}
	b := Map{
		UIDs: []Range{{0, 1000, 1}, {1, 100001, 65535}},
		GIDs: []Range{{0, 1000, 1}, {1, 100001, 65535}},
	}
	da, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Fatalf("equal mappings have different digests: %s %s", da, db)
	}
	dc, err := Single(1000, 1000).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if dc == da {
		t.Fatal("different mappings share a digest")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		m    Map
		ok   bool
	}{
		{"single", Single(1000, 1000), true},
		{"subordinate", Map{UIDs: []Range{{0, 1000, 1}, {1, 100000, 65536}}, GIDs: []Range{{0, 1000, 1}}}, true},
		{"no uids", Map{GIDs: []Range{{0, 1, 1}}}, false},
		{"no gids", Map{UIDs: []Range{{0, 1, 1}}}, false},
		{"empty range", Map{UIDs: []Range{{0, 1, 0}}, GIDs: []Range{{0, 1, 1}}}, false},
		{"overflow", Map{UIDs: []Range{{0, 0xffffffff, 2}}, GIDs: []Range{{0, 1, 1}}}, false},
		{"container overlap", Map{UIDs: []Range{{0, 10, 5}, {4, 100, 1}}, GIDs: []Range{{0, 1, 1}}}, false},
		{"host overlap", Map{UIDs: []Range{{0, 10, 5}, {10, 14, 1}}, GIDs: []Range{{0, 1, 1}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Validate()
			if tt.ok && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid", err)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	m := Map{UIDs: []Range{{0, 1000, 1}, {1, 100000, 65536}}, GIDs: []Range{{0, 1000, 1}}}
	for _, c := range []struct {
		in   uint32
		want uint32
		ok   bool
	}{{0, 1000, true}, {1, 100000, true}, {65536, 165535, true}, {65537, 0, false}} {
		got, ok := m.HostUID(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("HostUID(%d) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if _, ok := m.HostGID(1); ok {
		t.Error("HostGID(1) mapped in a single-GID map")
	}
}
