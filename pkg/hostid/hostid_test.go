package hostid

import (
	"bytes"
	"encoding/hex"
	"testing"

	"lazaret.dev/pkg/postcard"
)

// The golden bytes follow the Postcard rules: fixed arrays raw, u32 and u64
// as LEB128 varints (300 = 0xac 0x02).
func TestPidfsIdentityGolden(t *testing.T) {
	id := PidfsProcessIdentityV1{
		Authority: PidfsProcessAuthorityV1{
			BootID:     BootID{0: 0x01, 15: 0xff},
			PidfsDev:   300,
			PidfsInode: 1,
		},
		HostPID:        127,
		StartTimeTicks: 128,
	}
	want, _ := hex.DecodeString("01" + "0000000000000000000000000000" + "ff" + "ac02" + "01" + "7f" + "8001")
	got := postcard.Marshal(&id)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x, want %x", got, want)
	}
	var back PidfsProcessIdentityV1
	if err := postcard.Unmarshal(got, &back); err != nil || back != id {
		t.Fatalf("decode = %+v, %v", back, err)
	}
	if err := postcard.Unmarshal(append(got, 0), &back); err == nil {
		t.Fatal("trailing byte accepted")
	}
}
