package control

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"lazaret.dev/pkg/netpolicy"
)

func TestNetworkPolicyFile(t *testing.T) {
	pol, err := netpolicy.Derive(
		[]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
		[]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
			netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("198.51.100.64/26")},
		[]netip.Addr{netip.MustParseAddr("198.51.100.53")})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := pol.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteNetworkPolicy(dir, enc); err != nil {
		t.Fatal(err)
	}
	got, digest, err := ReadNetworkPolicy(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := netpolicy.DigestOfEncoding(enc); digest != want {
		t.Fatalf("digest %v, want %v", digest, want)
	}
	if len(got.PrefixRules) != len(pol.PrefixRules) || got.Resolvers[0] != pol.Resolvers[0] {
		t.Fatalf("read %+v, wrote %+v", got, pol)
	}
	path := filepath.Join(dir, NetworkPolicyName)
	t.Run("truncated", func(t *testing.T) {
		if err := os.WriteFile(path, enc[:len(enc)-1], 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadNetworkPolicy(dir); err == nil {
			t.Fatal("a truncated policy file was accepted")
		}
	})
	t.Run("writable by others", func(t *testing.T) {
		if err := os.WriteFile(path, enc, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadNetworkPolicy(dir); err == nil {
			t.Fatal("a policy file writable by others was accepted")
		}
	})
}
