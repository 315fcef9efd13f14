package prepare

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/image/build"
	"lazaret.dev/pkg/image/idmap"
	"lazaret.dev/pkg/image/store"
	"lazaret.dev/pkg/image/unpack"
	pstore "lazaret.dev/pkg/store"
	"lazaret.dev/pkg/testtree"
)

func selfMap() idmap.Map { return idmap.Single(uint32(os.Getuid()), uint32(os.Getgid())) }

func setup(t *testing.T) (*Preparer, *store.Store) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "storage")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(filepath.Join(root, "images"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Preparer{Root: root, Images: s}, s
}

func putTree(t *testing.T, s *store.Store, ref string, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	testtree.Write(t, dir, files)
	l, err := build.Layer(dir, build.Options{Time: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{l}, build.Config{Cmd: []string{"/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), ref, img, nil); err != nil {
		t.Fatal(err)
	}
}

func putRawLayer(t *testing.T, s *store.Store, ref string, hdrs ...tar.Header) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	data := b.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{l}, build.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), ref, img, nil); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, p *Preparer) catalog.Contents {
	t.Helper()
	var c catalog.Contents
	err := p.withCatalog(func(cat *catalog.Catalog) error {
		return cat.View(func(tx *catalog.Tx) error {
			var err error
			c, err = tx.Scan()
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestPrepare(t *testing.T) {
	p, s := setup(t)
	putTree(t, s, "localhost/agent:1", map[string]string{"etc/motd": "hi"})
	ctx := context.Background()
	a, err := p.Prepare(ctx, "localhost/agent:1", selfMap())
	if err != nil {
		t.Fatal(err)
	}
	if a.State != catalog.ArtifactAvailable || a.Path != p.ArtifactPath(a.PreparedArtifactID) {
		t.Fatalf("artifact %+v", a)
	}
	if b, err := os.ReadFile(filepath.Join(a.Path, "etc/motd")); err != nil || string(b) != "hi" {
		t.Fatalf("etc/motd = %q, %v", b, err)
	}
	img, err := s.Open("localhost/agent:1")
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.identity(img, selfMap())
	img.Close()
	if err != nil {
		t.Fatal(err)
	}
	if a.PreparedArtifactID != want.ArtifactID() || a.PolicyID != PolicyDigest() || a.SelectedManifestDigest != want.Manifest {
		t.Fatalf("artifact identity %+v, want %+v", a, want)
	}
	again, err := p.Prepare(ctx, "localhost/agent:1", selfMap())
	if err != nil || again != a {
		t.Fatalf("second Prepare = %+v, %v; want the same artifact", again, err)
	}
	c := contents(t, p)
	if len(c.Artifacts) != 1 || len(c.Operations) != 0 {
		t.Fatalf("catalog %+v", c)
	}
	if names := dirNames(t, p.dir()); !slices.Equal(names, []string{a.PreparedArtifactID.String()}) {
		t.Fatalf("artifact directory holds %v", names)
	}
	// Another ID map is another artifact.
	m := idmap.Map{UIDs: []idmap.Range{{Container: 0, Host: uint32(os.Getuid()), Size: 1}}, GIDs: []idmap.Range{{Container: 0, Host: uint32(os.Getgid()), Size: 1}, {Container: 1, Host: 4000000, Size: 1}}}
	if os.Getuid() == 0 {
		b, err := p.Prepare(ctx, "localhost/agent:1", m)
		if err != nil {
			t.Fatal(err)
		}
		if b.PreparedArtifactID == a.PreparedArtifactID {
			t.Fatal("different ID maps share an artifact")
		}
	}
}

func TestPrepareConcurrent(t *testing.T) {
	p, s := setup(t)
	files := map[string]string{}
	for i := range 200 {
		files[filepath.Join("d", string(rune('a'+i%26)), strings.Repeat("f", 1+i%7)+string(rune('a'+i/26)))] = strings.Repeat("x", i)
	}
	putTree(t, s, "localhost/big:1", files)
	const n = 4
	var counter countHandler
	p.Log = slog.New(&counter)
	var wg sync.WaitGroup
	results := make([]catalog.PreparedArtifact, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			q := *p
			results[i], errs[i] = q.Prepare(context.Background(), "localhost/big:1", selfMap())
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("preparer %d: %v", i, errs[i])
		}
		if results[i] != results[0] {
			t.Fatalf("preparers disagree: %+v vs %+v", results[i], results[0])
		}
	}
	c := contents(t, p)
	if len(c.Artifacts) != 1 || len(c.Operations) != 0 {
		t.Fatalf("catalog after concurrent prepares: %d artifacts, %d operations", len(c.Artifacts), len(c.Operations))
	}
	if names := dirNames(t, p.dir()); !slices.Equal(names, []string{results[0].PreparedArtifactID.String()}) {
		t.Fatalf("artifact directory holds %v; losers must discard their stages", names)
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if counter.msgs["artifact published"] != 1 {
		t.Fatalf("%d publications, want 1", counter.msgs["artifact published"])
	}
	t.Logf("%d preparers unpacked and lost the publish race", counter.msgs["another preparer published first; discarding stage"])
}

type countHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.msgs == nil {
		h.msgs = map[string]int{}
	}
	h.msgs[r.Message]++
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

func TestPrepareRefusesUnsafeImage(t *testing.T) {
	p, s := setup(t)
	putRawLayer(t, s, "localhost/evil:1",
		tar.Header{Name: "ok", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644},
	)
	_, err := p.Prepare(context.Background(), "localhost/evil:1", selfMap())
	var ee *unpack.EntryError
	if !errors.Is(err, unpack.ErrParentComponent) || !errors.As(err, &ee) || ee.Entry != "../escape" || !strings.HasPrefix(ee.Layer, "sha256:") {
		t.Fatalf("error %v, want a refused ../escape naming its layer", err)
	}
	if names := dirNames(t, p.dir()); len(names) != 0 {
		t.Fatalf("artifact directory holds %v after a refused prepare", names)
	}
	if c := contents(t, p); len(c.Artifacts)+len(c.Operations) != 0 {
		t.Fatalf("catalog after a refused prepare: %+v", c)
	}
	if _, err := os.Lstat(filepath.Join(p.Root, "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("escape written outside the stage: %v", err)
	}
}

func TestPrepareMissingImage(t *testing.T) {
	p, _ := setup(t)
	if _, err := p.Prepare(context.Background(), "localhost/none:1", selfMap()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("error %v, want store.ErrNotFound", err)
	}
}

func TestLeaseAndReclaim(t *testing.T) {
	p, s := setup(t)
	putTree(t, s, "localhost/agent:1", map[string]string{"ro/f": "x"})
	a, err := p.Prepare(context.Background(), "localhost/agent:1", selfMap())
	if err != nil {
		t.Fatal(err)
	}
	// A read-only directory inside the artifact must not stop reclaim.
	if err := os.Chmod(filepath.Join(a.Path, "ro"), 0o500); err != nil {
		t.Fatal(err)
	}
	lease := catalog.ArtifactLease{PreparedArtifactID: a.PreparedArtifactID, DomainID: ids.DomainID{1}, GenerationID: ids.GenerationID(ids.New())}
	if err := p.Acquire(lease); err != nil {
		t.Fatal(err)
	}
	if err := p.Acquire(lease); !errors.Is(err, pstore.ErrExists) {
		t.Fatalf("second Acquire: %v, want ErrExists", err)
	}
	res, err := p.Reclaim()
	if err != nil || res.Leased != 1 || len(res.Reclaimed) != 0 {
		t.Fatalf("Reclaim of a leased artifact = %+v, %v", res, err)
	}
	if err := p.ReclaimArtifact(a.PreparedArtifactID); !errors.Is(err, pstore.ErrIllegalTransition) {
		t.Fatalf("ReclaimArtifact of a leased artifact: %v, want ErrIllegalTransition", err)
	}
	if _, err := os.Lstat(a.Path); err != nil {
		t.Fatalf("leased artifact removed: %v", err)
	}
	if err := p.Release(lease); err != nil {
		t.Fatal(err)
	}
	res, err = p.Reclaim()
	if err != nil || len(res.Reclaimed) != 1 || res.Reclaimed[0] != a.PreparedArtifactID {
		t.Fatalf("Reclaim = %+v, %v", res, err)
	}
	if _, err := os.Lstat(a.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reclaimed artifact still on disk: %v", err)
	}
	if c := contents(t, p); len(c.Artifacts) != 0 {
		t.Fatalf("catalog still lists %+v", c.Artifacts)
	}
}

func TestReclaimRefusesReplacedDirectory(t *testing.T) {
	p, s := setup(t)
	putTree(t, s, "localhost/agent:1", map[string]string{"f": "x"})
	a, err := p.Prepare(context.Background(), "localhost/agent:1", selfMap())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a.Path, a.Path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Prepare(context.Background(), "localhost/agent:1", selfMap()); !errors.Is(err, ErrIdentity) {
		t.Fatalf("Prepare over a replaced directory: %v, want ErrIdentity", err)
	}
	if err := p.ReclaimArtifact(a.PreparedArtifactID); !errors.Is(err, ErrIdentity) {
		t.Fatalf("ReclaimArtifact of a replaced directory: %v, want ErrIdentity", err)
	}
	if _, err := os.Lstat(a.Path); err != nil {
		t.Fatalf("replaced directory was removed: %v", err)
	}
}

func TestRecover(t *testing.T) {
	p, _ := setup(t)
	if err := p.ensureDir(); err != nil {
		t.Fatal(err)
	}
	mk := func(state catalog.PrepareStageState, createStage bool) (catalog.PrepareOperation, string) {
		op := ids.OperationID(ids.New())
		stage := filepath.Join(p.dir(), stagePrefix+op.String())
		o := catalog.PrepareOperation{
			OperationID: op, ExpectedArtifactID: ids.Digest{9}, SourceIdentity: ids.Digest{1},
			SelectedManifestDigest: ids.Digest{1}, PolicyID: PolicyDigest(), IDMapDigest: ids.Digest{2},
			StagePath: stage, StageState: catalog.StageIntent,
		}
		err := p.withCatalog(func(c *catalog.Catalog) error {
			return c.Update(func(tx *catalog.Tx) error { return tx.PutOperation(o) })
		})
		if err != nil {
			t.Fatal(err)
		}
		if createStage {
			if err := os.MkdirAll(filepath.Join(stage, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if state == catalog.StageOwned {
			id, err := identityOf(stage)
			if err != nil {
				t.Fatal(err)
			}
			o.StageState, o.Device, o.Inode = catalog.StageOwned, &id.dev, &id.ino
			err = p.withCatalog(func(c *catalog.Catalog) error {
				return c.Update(func(tx *catalog.Tx) error { return tx.PutOperation(o) })
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		return o, stage
	}
	_, ownedStage := mk(catalog.StageOwned, true)
	_, intentNoStage := mk(catalog.StageIntent, false)
	_, intentStage := mk(catalog.StageIntent, true)
	live, liveStage := mk(catalog.StageOwned, true)
	lock, err := lockStage(liveStage)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()

	res, err := p.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 2 || !slices.Equal(res.Unresolved, []string{intentStage}) {
		t.Fatalf("Recover = %+v; want 2 removed and %s unresolved", res, intentStage)
	}
	for _, gone := range []string{ownedStage, intentNoStage} {
		if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists: %v", gone, err)
		}
	}
	c := contents(t, p)
	if len(c.Operations) != 2 {
		t.Fatalf("operations left: %d, want the live one and the unresolved Intent", len(c.Operations))
	}
	if !slices.ContainsFunc(c.Operations, func(o catalog.PrepareOperation) bool { return o.OperationID == live.OperationID }) {
		t.Fatal("live operation was recovered")
	}
}
