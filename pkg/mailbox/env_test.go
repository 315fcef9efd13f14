package mailbox_test

import (
	"encoding/base64"
	"errors"
	"testing"

	"lazaret.dev/pkg/escalation/escalationtest"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/postcard"
	"lazaret.dev/pkg/protocol"
)

func TestCapabilityEnv(t *testing.T) {
	f := escalationtest.New(t)
	s, err := mailbox.EncodeCapability(&f.Capability)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := protocol.Encode(&f.Capability)
	if s != base64.StdEncoding.EncodeToString(raw) {
		t.Fatalf("EncodeCapability = %q, want standard base64 of the Postcard bytes", s)
	}
	back, err := mailbox.DecodeCapability(s)
	if err != nil || back != f.Capability {
		t.Fatalf("DecodeCapability = %+v, %v", back, err)
	}
	tests := []struct {
		name, value string
		err         error // nil: any error
	}{
		{"not base64", "!!", nil},
		{"unpadded", base64.RawStdEncoding.EncodeToString(raw[:len(raw)-1]), nil},
		{"url alphabet", base64.URLEncoding.EncodeToString(append(raw, 0xfb, 0xff)), nil},
		{"truncated", base64.StdEncoding.EncodeToString(raw[:len(raw)-1]), postcard.ErrTruncated},
		{"trailing byte", base64.StdEncoding.EncodeToString(append(raw, 0)), postcard.ErrTrailing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mailbox.DecodeCapability(tt.value)
			if err == nil || (tt.err != nil && !errors.Is(err, tt.err)) {
				t.Fatalf("DecodeCapability(%q) = %v, want %v", tt.value, err, tt.err)
			}
		})
	}
}
