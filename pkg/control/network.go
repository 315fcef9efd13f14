package control

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

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

// NameLogName is the file in a Domain's runtime directory where the
// network sidecar's pinning resolver records its decisions (see
// netsidecar.NameLog); status, net explain and net log read it. It lives
// as long as the network-policy file.
const NameLogName = "network-names.log"

// OpenNameLog creates (or empties) the name log in dir for a new
// generation's sidecar, open for appending only, mode 0600.
func OpenNameLog(dir string) (*os.File, error) {
	path := filepath.Join(dir, NameLogName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the name log: %w", err)
	}
	return f, nil
}

// NameLogPath is the name log's path in dir.
func NameLogPath(dir string) string { return filepath.Join(dir, NameLogName) }
