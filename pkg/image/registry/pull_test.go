package registry_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"lazaret.dev/pkg/image/build"
	lzregistry "lazaret.dev/pkg/image/registry"
	"lazaret.dev/pkg/image/store"
)

func testImage(t *testing.T, content string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "motd"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := build.Layer(dir, build.Options{Time: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{l}, build.Config{Cmd: []string{"/bin/sh"}, Created: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "images"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// basicAuth wraps a registry handler with HTTP basic authentication.
func basicAuth(h http.Handler, user, pass string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func TestPull(t *testing.T) {
	img := testImage(t, "pulled")
	digest, _ := img.Digest()
	tests := []struct {
		name      string
		auth      bool
		dockerCfg string // user:pass written into $DOCKER_CONFIG/config.json
		wantErr   bool
	}{
		{"anonymous", false, "", false},
		{"credentials from docker config", true, "agent:s3cret", false},
		{"wrong credentials", true, "agent:wrong", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
			if tt.auth {
				h = basicAuth(h, "agent", "s3cret")
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			host := strings.TrimPrefix(srv.URL, "http://")
			ref := host + "/team/agent:1"
			tag, err := name.NewTag(ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: "agent", Password: "s3cret"})); err != nil {
				t.Fatal(err)
			}
			cfgDir := t.TempDir()
			t.Setenv("DOCKER_CONFIG", cfgDir)
			if tt.dockerCfg != "" {
				cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(tt.dockerCfg)))
				if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s := openStore(t)
			var last, total int64
			e, err := lzregistry.Pull(context.Background(), s, ref, lzregistry.PullOptions{Progress: func(d, n int64) { last, total = d, n }})
			if tt.wantErr {
				if err == nil {
					t.Fatal("pull with wrong credentials succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Ref != ref || e.Manifest != digest || e.Source != digest {
				t.Errorf("entry %+v, want %s at %s", e, ref, digest)
			}
			if total == 0 || last != total {
				t.Errorf("progress ended at %d of %d", last, total)
			}
		})
	}
}

func platformImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	l, err := build.Layer(t.TempDir(), build.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{l}, build.Config{Platform: v1.Platform{OS: "linux", Architecture: arch}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestPullSelectsPlatformFromIndex(t *testing.T) {
	amd, arm := platformImage(t, "amd64"), platformImage(t, "arm64")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/multi:1"
	tag, _ := name.NewTag(ref)
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	idxDigest, _ := idx.Digest()
	for _, c := range []struct {
		arch string
		img  v1.Image
	}{{"amd64", amd}, {"arm64", arm}} {
		t.Run(c.arch, func(t *testing.T) {
			s := openStore(t)
			e, err := lzregistry.Pull(context.Background(), s, ref, lzregistry.PullOptions{Platform: v1.Platform{OS: "linux", Architecture: c.arch}})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := c.img.Digest()
			if e.Manifest != want || e.Source != idxDigest || e.Platform != "linux/"+c.arch {
				t.Fatalf("entry %+v: want manifest %s from index %s", e, want, idxDigest)
			}
		})
	}
	t.Run("absent platform", func(t *testing.T) {
		s := openStore(t)
		_, err := lzregistry.Pull(context.Background(), s, ref, lzregistry.PullOptions{Platform: v1.Platform{OS: "linux", Architecture: "riscv64"}})
		if err == nil || !strings.Contains(err.Error(), "riscv64") {
			t.Fatalf("error %v, want one naming the missing platform", err)
		}
	})
}
