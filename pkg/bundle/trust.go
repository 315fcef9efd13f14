package bundle

import "fmt"

// TrustStores are the sandbox paths of the system CA bundle that common
// distributions' TLS libraries read, in the order Lazaret looks for them
// in an image: Debian, Ubuntu and Alpine; Fedora and RHEL; Alpine's and
// LibreSSL's single file. With a credential broker, Lazaret mounts the
// image's bundle plus the broker's CA over those the image has. They are
// not in the protected layout: a volume may cover them, and then it
// supplies the bundle at that path.
var TrustStores = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
}

// TrustBundleName is the file beneath Input.EtcDir that Input.TrustStores
// mount.
const TrustBundleName = "ca-certificates.crt"

// ImageTrustStores finds the CA bundles of the image whose root
// filesystem is open at rootFd: the members of TrustStores that
// are regular files in it (opened with RESOLVE_IN_ROOT, so a symbolic
// link in the image cannot make Lazaret read a host file), and the
// content of the first found. An image without any gets the first path
// and no content: the credential broker's CA is then its only trusted
// root there.
func ImageTrustStores(rootFd int) (paths []string, first []byte, err error) {
	for _, p := range TrustStores {
		content, err := readInRoot(rootFd, p[1:])
		if err != nil {
			return nil, nil, fmt.Errorf("reading the image's CA bundle: %w", err)
		}
		if content == "" {
			continue
		}
		if paths == nil {
			first = []byte(content)
		}
		paths = append(paths, p)
	}
	if paths == nil {
		paths = []string{TrustStores[0]}
	}
	return paths, first, nil
}
