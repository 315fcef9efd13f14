package control

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/postcard"
	"lazaret.dev/pkg/protocol"
)

func TestPublication(t *testing.T) {
	g := newGeneration(t)
	root := t.TempDir()
	p := DomainPaths(root, g.gen.DomainID)
	if want := filepath.Join(root, "domains", g.gen.DomainID.String(), "control.sock"); p.Socket != want {
		t.Fatalf("socket path %q, want %q", p.Socket, want)
	}
	staged, err := Stage(p, &g.pub, &g.manifest)
	if err != nil {
		t.Fatal(err)
	}
	defer staged.Listener.Close()
	for _, name := range []string{p.StagedSocket, p.StagedIdentity} {
		fi, err := os.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v", name, fi.Mode())
		}
	}
	if fi, err := os.Stat(p.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v, %v", fi.Mode(), err)
	}
	if _, err := Stage(p, &g.pub, &g.manifest); err == nil {
		t.Fatal("Stage over existing staged names succeeded")
	}
	if _, err := os.Stat(p.Identity); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("identity file visible before Publish: %v", err)
	}
	pub, err := staged.Publish()
	if err != nil {
		t.Fatal(err)
	}
	if pub.Socket != staged.Socket || pub.IdentityFile != staged.IdentityFile || pub.Socket == (hostid.MountIdentity{}) {
		t.Fatalf("identities changed: %+v vs %+v", pub, staged)
	}
	for _, name := range []string{p.StagedSocket, p.StagedIdentity} {
		if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still exists: %v", name, err)
		}
	}
	gotPub, gotManifest, err := ReadIdentityFile(p.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if gotPub.CoordinatorTLSCertificateSHA256 != g.pub.CoordinatorTLSCertificateSHA256 || gotManifest.Digest() != g.manifest.Digest() {
		t.Fatal("identity file does not round-trip")
	}

	// A replaced identity file is not removed.
	wrong := pub
	wrong.IdentityFile.Inode++
	if err := Withdraw(wrong); !errors.Is(err, ErrPublication) {
		t.Fatalf("Withdraw with a wrong identity = %v", err)
	}
	if _, err := os.Lstat(p.Identity); err != nil {
		t.Fatalf("identity file removed despite mismatch: %v", err)
	}
	if err := Withdraw(pub); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p.Socket, p.Identity} {
		if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still exists: %v", name, err)
		}
	}
	if err := Withdraw(pub); err != nil {
		t.Fatalf("second Withdraw: %v", err)
	}
}

func TestStageAbort(t *testing.T) {
	g := newGeneration(t)
	p := DomainPaths(t.TempDir(), g.gen.DomainID)
	staged, err := Stage(p, &g.pub, &g.manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := staged.Abort(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(p.Dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("after Abort: %v, %v", entries, err)
	}
}

func TestStageRefusesSharedDirectory(t *testing.T) {
	g := newGeneration(t)
	p := DomainPaths(t.TempDir(), g.gen.DomainID)
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Stage(p, &g.pub, &g.manifest); !errors.Is(err, ErrPublication) {
		t.Fatalf("Stage in a 0755 directory = %v", err)
	}
}

func TestReadIdentityFileRefusals(t *testing.T) {
	g := newGeneration(t)
	content, err := EncodeIdentityFile(&g.pub, &g.manifest)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, path string)
	}{
		{"group writable", func(t *testing.T, dir, path string) {
			os.WriteFile(path, content, 0o600)
			os.Chmod(path, 0o620)
		}},
		{"symlink", func(t *testing.T, dir, path string) {
			os.WriteFile(filepath.Join(dir, "real"), content, 0o600)
			os.Symlink("real", path)
		}},
		{"directory", func(t *testing.T, dir, path string) { os.Mkdir(path, 0o700) }},
		{"trailing byte", func(t *testing.T, dir, path string) { os.WriteFile(path, append(bytes.Clone(content), 0), 0o600) }},
		{"truncated", func(t *testing.T, dir, path string) { os.WriteFile(path, content[:len(content)-1], 0o600) }},
		{"directory open to others", func(t *testing.T, dir, path string) {
			os.WriteFile(path, content, 0o600)
			os.Chmod(dir, 0o711)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, IdentityName)
			tt.setup(t, dir, path)
			if _, _, err := ReadIdentityFile(path); err == nil {
				t.Fatal("ReadIdentityFile succeeded")
			}
		})
	}
}

func TestIdentityFileVerification(t *testing.T) {
	g := newGeneration(t)
	other := newGeneration(t)
	if _, err := EncodeIdentityFile(&g.pub, &other.manifest); !errors.Is(err, protocol.ErrTrustManifest) {
		t.Fatalf("EncodeIdentityFile with a foreign manifest = %v", err)
	}
	// A manifest that does not match the publication's digest is refused
	// on reading as well.
	a, _ := protocol.Encode(&g.pub)
	b, _ := protocol.Encode(&other.manifest)
	if _, _, err := DecodeIdentityFile(append(a, b...)); !errors.Is(err, protocol.ErrTrustManifest) {
		t.Fatalf("DecodeIdentityFile with a foreign manifest = %v", err)
	}
	if _, _, err := DecodeIdentityFile(a); !errors.Is(err, postcard.ErrTruncated) {
		t.Fatalf("DecodeIdentityFile without a manifest = %v", err)
	}
}
