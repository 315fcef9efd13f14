package bundle

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTrustStoreMounts: each trust store given is mounted read-only from
// the etc directory's bundle, except beneath a volume; a path outside
// TrustStores is refused.
func TestTrustStoreMounts(t *testing.T) {
	in := baseInput()
	in.TrustStores = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"}
	in.Volumes = []Volume{{Source: "/home/dev/pki", Destination: "/etc/pki"}}
	spec, err := Container(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range spec.Mounts {
		if slices.Contains(TrustStores, m.Destination) {
			got = append(got, m.Destination)
			if m.Source != filepath.Join(in.EtcDir, TrustBundleName) || !slices.Contains(m.Options, "ro") {
				t.Errorf("trust store mount %+v", m)
			}
		}
	}
	if !slices.Equal(got, []string{"/etc/ssl/certs/ca-certificates.crt"}) {
		t.Errorf("trust stores mounted %q; want only the one no volume covers", got)
	}
	in.TrustStores = []string{"/etc/passwd"}
	if _, err := Container(in); !errors.Is(err, ErrInvalid) {
		t.Errorf("trust store /etc/passwd: %v", err)
	}
}

// TestImageTrustStores finds the image's bundles inside its root only.
func TestImageTrustStores(t *testing.T) {
	root := t.TempDir()
	open := func() int {
		fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	paths, content, err := ImageTrustStores(open())
	if err != nil || !slices.Equal(paths, TrustStores[:1]) || content != nil {
		t.Fatalf("an image without a bundle: %q, %q, %v", paths, content, err)
	}
	os.MkdirAll(filepath.Join(root, "etc/ssl/certs"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), []byte("image bundle\n"), 0o644)
	// Alpine's link, absolute: it resolves inside the image.
	os.Symlink("/etc/ssl/certs/ca-certificates.crt", filepath.Join(root, "etc/ssl/cert.pem"))
	paths, content, err = ImageTrustStores(open())
	if err != nil || !slices.Equal(paths, []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem"}) || string(content) != "image bundle\n" {
		t.Fatalf("ImageTrustStores = %q, %q, %v", paths, content, err)
	}
}
