package hostid

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"lazaret.dev/pkg/postcard"
	"lazaret.dev/pkg/store/codec"
)

func TestOwnershipCBORGolden(t *testing.T) {
	cases := []struct {
		o   PersistedHostProcessOwnership
		hex string
	}{
		{PersistedHostProcessOwnership{}, "a16a556e61737369676e6564a0"},
		{StagedOwnership(testIdentity(1)), "a166537461676564a368686f73745f7069641903e969617574686f72697479a367626f6f745f696450010100000000000000000000000000006c70696466735f73745f646576116c70696466735f73745f696e6f18657073746172745f74696d655f7469636b7305"},
	}
	for _, c := range cases {
		got, err := codec.Marshal(c.o)
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(got) != c.hex {
			t.Errorf("%v encodes as %x, want %s", c.o, got, c.hex)
		}
		var back PersistedHostProcessOwnership
		if err := codec.Unmarshal(got, &back); err != nil || back != c.o {
			t.Errorf("round trip of %v = %v, %v", c.o, back, err)
		}
	}
	committed, _ := codec.Marshal(CommittedOwnership(testIdentity(1)))
	if !bytes.HasPrefix(committed, []byte("\xa1\x69Committed\xa1\x68identity")) {
		t.Errorf("committed encoding %x", committed)
	}
}

func TestOwnershipCBORRefusals(t *testing.T) {
	staged, _ := codec.Marshal(StagedOwnership(testIdentity(1)))
	cases := map[string][]byte{
		"two variants":   mustHex("a2" + "6a556e61737369676e6564a0" + staged2(staged)),
		"no variant":     mustHex("a0"),
		"unknown key":    mustHex("a1" + "65537461676f" + "a0"),
		"short boot id":  bytes.Replace(staged, []byte("\x50\x01\x01"), []byte("\x4f\x01"), 1),
		"trailing bytes": append(bytes.Clone(staged), 0),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			var o PersistedHostProcessOwnership
			if err := codec.Unmarshal(b, &o); !errors.Is(err, codec.ErrDecode) {
				t.Fatalf("= %v, want ErrDecode", err)
			}
		})
	}
}

func staged2(staged []byte) string { return hex.EncodeToString(staged[1:]) }

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestOwnershipPostcard(t *testing.T) {
	for _, o := range []PersistedHostProcessOwnership{{}, StagedOwnership(testIdentity(1)), CommittedOwnership(testIdentity(2))} {
		b := postcard.Marshal(&o)
		var back PersistedHostProcessOwnership
		if err := postcard.Unmarshal(b, &back); err != nil || back != o {
			t.Fatalf("%v: %v, %v", o, back, err)
		}
		if b[0] != byte(o.Phase) {
			t.Fatalf("%v variant byte %d", o, b[0])
		}
	}
	if err := postcard.Unmarshal([]byte{3}, new(PersistedHostProcessOwnership)); !errors.Is(err, postcard.ErrUnknownEnum) {
		t.Fatalf("variant 3: %v", err)
	}
}
