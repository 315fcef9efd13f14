package broker_test

import (
	"bytes"
	"testing"

	"lazaret.dev/pkg/broker"
	"lazaret.dev/pkg/broker/brokertest"
)

// FuzzDecodeConfig checks that DecodeConfig never panics and that whatever
// it accepts encodes to a form it decodes to the same encoding.
func FuzzDecodeConfig(f *testing.F) {
	b, err := brokertest.Config(f).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"version":"lazaret-broker-config-v1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := broker.DecodeConfig(data)
		if err != nil {
			return
		}
		enc, err := c.Encode()
		if err != nil {
			t.Fatalf("a decoded configuration does not encode: %v", err)
		}
		d, err := broker.DecodeConfig(enc)
		if err != nil {
			t.Fatalf("an encoded configuration does not decode: %v", err)
		}
		if again, err := d.Encode(); err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not stable (%v)", err)
		}
	})
}
