package cli

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/image/build"
	"lazaret.dev/pkg/image/store"
)

func runImage(t *testing.T, root string, args ...string) (string, error) {
	t.Helper()
	return runImageArgs(t, append([]string{"image", "--storage-root", root}, args...)...)
}

func runImageArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, errOut, err := runImageStderr(t, args...)
	if errOut != "" {
		t.Errorf("stderr is not a terminal, yet got %q", errOut)
	}
	return out, err
}

// runImageStderr runs the CLI with stdout and stderr not terminals.
func runImageStderr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	// A missing --storage-root must never reach the real default root.
	t.Setenv("XDG_DATA_HOME", filepath.Join(t.TempDir(), "unused-data-home"))
	// Nor may the developer's own configuration choose it.
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(t.TempDir(), "unused-config-home"))
	t.Setenv("LAZARET_CONFIG", "")
	var out, errOut bytes.Buffer
	app := &cli.App{
		Name:      "lazaret-cli",
		Commands:  []*cli.Command{imageCommand()},
		Writer:    &out,
		ErrWriter: &errOut,
	}
	full := append([]string{"lazaret-cli"}, args...)
	err := app.RunContext(context.Background(), full)
	return out.String(), errOut.String(), err
}

func TestImageCommands(t *testing.T) {
	root := filepath.Join(t.TempDir(), "storage")
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tool", filepath.Join(tree, "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	out, err := runImage(t, root, "build-dir", "--tag", "localhost/demo:1",
		"--entrypoint", `["/bin/sh","-c"]`, "--env", "A=1,2", "--env", "PATH=/bin",
		"--user", "0:0", "--workdir", "/", "--source-date-epoch", "1700000000", tree)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^stored localhost/demo:1 sha256:[0-9a-f]{64}\n$`).MatchString(out) {
		t.Fatalf("build-dir output %q", out)
	}
	s, err := store.Open(filepath.Join(root, "images"), nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Open("localhost/demo:1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := img.Config.Config
	img.Close()
	if strings.Join(cfg.Entrypoint, " ") != "/bin/sh -c" || strings.Join(cfg.Env, ";") != "A=1,2;PATH=/bin" || cfg.User != "0:0" {
		t.Fatalf("stored config %+v", cfg)
	}

	// Save it as an OCI layout and load it back under another name.
	simg, err := s.Open("localhost/demo:1")
	if err != nil {
		t.Fatal(err)
	}
	simg.Close()
	lp, err := layout.FromPath(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	v1img, err := lp.Image(simg.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	exported := filepath.Join(t.TempDir(), "oci")
	ep, err := layout.Write(exported, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.AppendImage(v1img); err != nil {
		t.Fatal(err)
	}
	out, err = runImage(t, root, "load", "--tag", "localhost/copy:2", exported)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "found OCI image layout directory\nloaded localhost/copy:2 "+simg.Manifest.String()) {
		t.Fatalf("load output %q", out)
	}

	out, err = runImage(t, root, "ls")
	if err != nil {
		t.Fatal(err)
	}
	// The flag also works after the subcommand.
	if again, err := runImageArgs(t, "image", "ls", "--storage-root", root); err != nil || again != out {
		t.Fatalf("ls --storage-root after the subcommand = %q, %v; want %q", again, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "REFERENCE") ||
		!strings.HasPrefix(lines[1], "localhost/copy:2") || !strings.HasPrefix(lines[2], "localhost/demo:1") ||
		!strings.Contains(lines[2], "2023-11-14T22:13:20Z") {
		t.Fatalf("ls output:\n%s", out)
	}

	if out, err = runImage(t, root, "rm", "localhost/demo:1", "localhost/copy:2"); err != nil {
		t.Fatal(err)
	}
	if out != "removed localhost/demo:1\nremoved localhost/copy:2\n" {
		t.Fatalf("rm output %q", out)
	}
	out, err = runImage(t, root, "prune")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "deleted 3 blobs") {
		t.Fatalf("prune output %q", out)
	}
}

func TestImageCommandErrors(t *testing.T) {
	root := filepath.Join(t.TempDir(), "storage")
	garbage := filepath.Join(t.TempDir(), "garbage.tar")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("nope"), 200), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"load garbage", []string{"load", garbage}, "is not a tar archive"},
		{"load two files", []string{"load", "a", "b"}, "expected exactly one FILE"},
		{"rm unknown", []string{"rm", "localhost/none:1"}, "image localhost/none:1: image not found"},
		{"bad platform", []string{"pull", "--platform", "linux", "localhost/x:1"}, "want os/arch"},
		{"bad entrypoint", []string{"build-dir", "--tag", "localhost/x:1", "--entrypoint", "/bin/sh", t.TempDir()}, "JSON array"},
		{"bad env", []string{"build-dir", "--tag", "localhost/x:1", "--env", "NOVALUE", t.TempDir()}, "NAME=VALUE"},
		{"bad reference", []string{"build-dir", "--tag", "Not A Ref", t.TempDir()}, "invalid image reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runImage(t, root, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestImagePullTwice pulls from a registry on 127.0.0.1 (plain HTTP, as
// for every loopback registry) with stderr not a terminal: one line per
// layer and a summary, nothing redrawn; the second pull downloads nothing.
func TestImagePullTwice(t *testing.T) {
	var blobGets atomic.Int64
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobGets.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/team/agent:1"
	tree := t.TempDir()
	if err := os.WriteFile(filepath.Join(tree, "motd"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	layer, err := build.Layer(tree, build.Options{Time: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{layer}, build.Config{Cmd: []string{"/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(ref)
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	ld, _ := layer.Digest()
	for _, v := range []string{"HOME", "DOCKER_CONFIG", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"} {
		t.Setenv(v, t.TempDir())
	}
	root := filepath.Join(t.TempDir(), "storage")

	blobGets.Store(0)
	out, errOut, err := runImageStderr(t, "image", "--storage-root", root, "pull", ref)
	if err != nil {
		t.Fatal(err)
	}
	if want := "pulled " + ref + " " + digest.String() + "\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if strings.ContainsAny(errOut, "\r\x1b") {
		t.Errorf("stderr is not a terminal, yet the progress redraws: %q", errOut)
	}
	short := ld.String()[:len("sha256:")+12]
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], ref+": 1 layer, ") ||
		!strings.HasPrefix(lines[1], "layer 1/1 "+short+" ") || !strings.HasSuffix(lines[1], ": downloading") ||
		!strings.HasSuffix(lines[2], ": done") ||
		!regexp.MustCompile(`^`+regexp.QuoteMeta(ref)+`: [0-9.]+ [kM]?B downloaded in `).MatchString(lines[3]) {
		t.Errorf("first pull's stderr:\n%s", errOut)
	}
	if blobGets.Load() != 2 {
		t.Errorf("first pull fetched %d blobs, want config and layer", blobGets.Load())
	}

	blobGets.Store(0)
	out, errOut, err = runImageStderr(t, "image", "--storage-root", root, "pull", ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "pulled "+ref) {
		t.Errorf("second pull's stdout %q", out)
	}
	if want := "layer 1/1 " + short + " "; !strings.Contains(errOut, want) || !strings.Contains(errOut, ": already stored\n") ||
		!strings.HasSuffix(errOut, ref+": up to date, 0 B downloaded\n") {
		t.Errorf("second pull's stderr:\n%s", errOut)
	}
	if blobGets.Load() != 0 {
		t.Errorf("second pull fetched %d blobs, want none", blobGets.Load())
	}
}
