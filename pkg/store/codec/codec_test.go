package codec

import (
	"encoding/hex"
	"errors"
	"testing"
)

type rec struct {
	ID   [4]byte `cbor:"id"`
	Name string  `cbor:"name"`
	N    *uint64 `cbor:"n,omitempty"`
}

func TestGolden(t *testing.T) {
	n := uint64(300)
	b, err := Marshal(rec{ID: [4]byte{1, 2, 3, 4}, Name: "a", N: &n})
	if err != nil {
		t.Fatal(err)
	}
	// Keys sorted bytewise by encoding: "n" (61 6e), "id" (62 69 64),
	// "name" (64 ...); 300 as a two-byte integer; the array as a byte string.
	const want = "a3616e19012c6269644401020304646e616d656161"
	if hex.EncodeToString(b) != want {
		t.Fatalf("= %x, want %s", b, want)
	}
	var back rec
	if err := Unmarshal(b, &back); err != nil || back.Name != "a" || *back.N != 300 {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}

func TestClosedDecoding(t *testing.T) {
	cases := map[string]string{
		"unknown field":        "a3626964440102030464616e616d656161656578747261" + "01",
		"duplicate key":        "a3626964440102030462696444010203046464616d6561",
		"short byte array":     "a26269644301020364" + "6e616d656161",
		"long byte array":      "a2626964450102030405" + "646e616d656161",
		"explicit null":        "a3616ef6626964440102030464" + "6e616d656161",
		"non-minimal integer":  "a3616e1a0000012c626964440102030464" + "6e616d656161",
		"unsorted keys":        "a2646e616d65616162696444" + "01020304",
		"indefinite map":       "bf626964440102030464" + "6e616d656161ff",
		"tag":                  "c0a2626964440102030464" + "6e616d656161",
		"trailing byte":        "a2626964440102030464" + "6e616d65616100",
		"byte string for text": "a2626964440102030464" + "6e616d654161",
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := hex.DecodeString(h)
			if err != nil {
				t.Fatal(err)
			}
			var r rec
			if err := Unmarshal(b, &r); !errors.Is(err, ErrDecode) {
				t.Fatalf("= %v, want ErrDecode", err)
			}
		})
	}
}

type color uint8

var colorNames = []string{"", "Red", "Blue"}

func (c color) MarshalText() ([]byte, error) { return EnumText(c, colorNames, "color") }
func (c *color) UnmarshalText(b []byte) error {
	v, err := EnumParse[color](b, colorNames, "color")
	*c = v
	return err
}

func TestEnum(t *testing.T) {
	b, err := Marshal(color(2))
	if err != nil || hex.EncodeToString(b) != "64426c7565" {
		t.Fatalf("= %x, %v", b, err)
	}
	if _, err := Marshal(color(0)); !errors.Is(err, ErrUnknownVariant) {
		t.Fatalf("zero enum encoded: %v", err)
	}
	var c color
	if err := Unmarshal([]byte("\x65Green"), &c); !errors.Is(err, ErrDecode) {
		t.Fatalf("unknown variant decoded: %v", err)
	}
}
