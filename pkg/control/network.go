package control

import (
	"fmt"
	"path/filepath"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/netpolicy"
)

// NetworkPolicyName is the file in a Domain's runtime directory that holds
// the canonical encoding of the derived network policy the running
// generation enforces, written once its readiness is proven and removed
// when its network is released. `lazaret-cli status` shows it; the Domain
// Store, which the running coordinator holds, records only its digest.
const NetworkPolicyName = "network-policy"

// maxNetworkPolicyFile bounds what ReadNetworkPolicy reads: far above the
// encoding of the largest policy a configuration can state.
const maxNetworkPolicyFile = 1 << 20

// WriteNetworkPolicy records the canonical policy encoding in dir.
func WriteNetworkPolicy(dir string, canonical []byte) error {
	return writeDomainFile(dir, NetworkPolicyName, canonical)
}

// ReadNetworkPolicy reads, decodes and validates dir/NetworkPolicyName and
// returns the policy with the digest of its encoding.
func ReadNetworkPolicy(dir string) (*netpolicy.DerivedNetworkPolicy, ids.Digest, error) {
	b, err := readDomainFile(dir, NetworkPolicyName, maxNetworkPolicyFile)
	if err != nil {
		return nil, ids.Digest{}, err
	}
	p, err := netpolicy.DecodePolicy(b)
	if err != nil {
		return nil, ids.Digest{}, fmt.Errorf("decoding %q: %w", filepath.Join(dir, NetworkPolicyName), err)
	}
	return p, netpolicy.DigestOfEncoding(b), nil
}
