package registry_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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

// testRegistry is go-containerregistry's registry served over TLS with
// basic authentication, as a private registry is. Its certificate names
// example.com, so the client reaches it as example.com:PORT (an https
// registry to go-containerregistry, unlike 127.0.0.1) through a dialer that
// only ever connects to the test server.
type testRegistry struct {
	srv      *httptest.Server
	host     string
	blobGets atomic.Int64 // GET requests for blobs (configs and layers)
}

const (
	testUser = "agent"
	testPass = "s3cret"
)

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	tr := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	tr.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != testUser || p != testPass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") {
			tr.blobGets.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.srv.Close)
	_, port, _ := net.SplitHostPort(tr.srv.Listener.Addr().String())
	tr.host = "example.com:" + port
	return tr
}

// transport reaches the test server whatever host is asked for; trustCA
// says whether it trusts the server's CA or only the system's.
func (tr *testRegistry) transport(trustCA bool) http.RoundTripper {
	var t *http.Transport
	if trustCA {
		t = tr.srv.Client().Transport.(*http.Transport).Clone()
	} else {
		t = http.DefaultTransport.(*http.Transport).Clone()
	}
	t.Proxy = nil
	addr := tr.srv.Listener.Addr().String()
	t.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return t
}

// push stores img in the registry under repo:tag and returns the reference.
func (tr *testRegistry) push(t *testing.T, repoTag string, img v1.Image) string {
	t.Helper()
	ref := tr.host + "/" + repoTag
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: testUser, Password: testPass}), remote.WithTransport(tr.transport(true))); err != nil {
		t.Fatal(err)
	}
	return ref
}

// dockerConfig points the default keychain at a docker config holding
// userPass for host, or at no configuration at all when userPass is empty.
func dockerConfig(t *testing.T, host, userPass string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(dir, "absent.json"))
	t.Setenv("DOCKER_CONFIG", dir)
	if userPass == "" {
		return
	}
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(userPass)))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// twoLayerImage is an image of two layers, so that per-layer events and
// fetch counts are not trivially one.
func twoLayerImage(t *testing.T) v1.Image {
	t.Helper()
	var layers []v1.Layer
	for _, content := range []string{"first", strings.Repeat("second layer ", 5000)} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "file"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := build.Layer(dir, build.Options{Time: time.Unix(1, 0)})
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	img, err := build.Image(layers, build.Config{Cmd: []string{"/bin/sh"}, Created: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageBytes is what a pull into an empty store copies: manifest, config
// and every compressed layer.
func imageBytes(t *testing.T, img v1.Image) int64 {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := img.RawManifest()
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

// record collects a pull's events.
type record struct{ events []store.Event }

func (r *record) progress(e store.Event) { r.events = append(r.events, e) }

func (r *record) last() store.Event { return r.events[len(r.events)-1] }

// layers lists, per event kind, the layer indexes it reported.
func (r *record) layers() map[store.EventKind][]int {
	out := map[store.EventKind][]int{}
	for _, e := range r.events {
		if e.Blob.What == "layer" && e.Kind != store.BlobBytes {
			out[e.Kind] = append(out[e.Kind], e.Blob.Index)
		}
	}
	return out
}

func TestPullAgainFetchesNothing(t *testing.T) {
	tr := newTestRegistry(t)
	img := twoLayerImage(t)
	digest, _ := img.Digest()
	ref := tr.push(t, "team/agent:1", img)
	dockerConfig(t, tr.host, testUser+":"+testPass)
	s := openStore(t)
	opts := lzregistry.PullOptions{Transport: tr.transport(true)}
	want := imageBytes(t, img)

	tr.blobGets.Store(0)
	var first record
	opts.Progress = first.progress
	e, err := lzregistry.Pull(context.Background(), s, ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if e.Ref != ref || e.Manifest != digest || e.Source != digest {
		t.Errorf("entry %+v, want %s at %s", e, ref, digest)
	}
	if got := tr.blobGets.Load(); got != 3 {
		t.Errorf("first pull made %d blob requests, want 3 (config and two layers)", got)
	}
	end := first.last()
	if end.Copied != want || end.Done != want || end.Total != want || end.LayersDone != 2 || end.Layers != 2 {
		t.Errorf("first pull ended at %+v, want %d bytes copied of %d and 2 of 2 layers", end, want, want)
	}
	if got := first.layers(); !slices.Equal(got[store.BlobStart], []int{1, 2}) || !slices.Equal(got[store.BlobDone], []int{1, 2}) || len(got[store.BlobPresent]) != 0 {
		t.Errorf("first pull's layer events %v, want start and done for layers 1 and 2", got)
	}

	tr.blobGets.Store(0)
	var second record
	opts.Progress = second.progress
	e2, err := lzregistry.Pull(context.Background(), s, ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	if e2.Manifest != digest {
		t.Errorf("second pull stored %s, want %s", e2.Manifest, digest)
	}
	if got := tr.blobGets.Load(); got != 0 {
		t.Errorf("second pull made %d blob requests, want none", got)
	}
	end = second.last()
	if end.Copied != 0 || end.Done != want || end.LayersDone != 2 {
		t.Errorf("second pull ended at %+v, want 0 bytes copied and all %d present", end, want)
	}
	if got := second.layers(); !slices.Equal(got[store.BlobPresent], []int{1, 2}) || len(got[store.BlobStart]) != 0 {
		t.Errorf("second pull's layer events %v, want both layers present", got)
	}
}

func TestPullErrors(t *testing.T) {
	tr := newTestRegistry(t)
	ref := tr.push(t, "team/agent:1", testImage(t, "pulled"))
	tests := []struct {
		name     string
		userPass string
		trustCA  bool
		want     error
		wantText string
	}{
		{"wrong password", testUser + ":wrong", true, lzregistry.ErrAuthentication, "registry " + tr.host + ": authentication failed"},
		{"no credentials", "", true, lzregistry.ErrAuthentication, "registry " + tr.host + ": authentication failed"},
		{"unknown CA", testUser + ":" + testPass, false, lzregistry.ErrUntrusted, "registry " + tr.host + ": TLS certificate not trusted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dockerConfig(t, tr.host, tt.userPass)
			s := openStore(t)
			_, err := lzregistry.Pull(context.Background(), s, ref, lzregistry.PullOptions{Transport: tr.transport(tt.trustCA)})
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("error %v, want %v naming the registry (%q)", err, tt.want, tt.wantText)
			}
			if es, _ := s.List(); len(es) != 0 {
				t.Errorf("failed pull stored %v", es)
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
