package catalog

import (
	"bytes"
	"errors"
	"testing"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/store/codec"
)

var proof = store.ProvenAbsent("test: stage removed")

func d(b byte) ids.Digest { return ids.Digest{b, 0xdd} }

func ptr[T any](v T) *T { return &v }

func op(state PrepareStageState) *PrepareOperation {
	o := &PrepareOperation{
		OperationID: ids.OperationID{0x0e}, ExpectedArtifactID: d(1), SourceIdentity: d(2), SelectedManifestDigest: d(3),
		PolicyID: d(4), IDMapDigest: d(5), StagePath: "/data/artifacts/.stage-0e", StageState: state,
	}
	if state == StageOwned {
		o.Device, o.Inode = ptr[uint64](64), ptr[uint64](1234)
	}
	return o
}

func artifact(s ArtifactState) *PreparedArtifact {
	return &PreparedArtifact{PreparedArtifactID: d(1), SourceIdentity: d(2), SelectedManifestDigest: d(3), PolicyID: d(4), IDMapDigest: d(5),
		Path: "/data/artifacts/01dd", Device: 64, Inode: 1234, State: s}
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("legal write refused: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("= %v, want %v", err, want)
	}
}

func TestPrepareOperationTransitions(t *testing.T) {
	ownedNoInode := op(StageOwned)
	ownedNoInode.Inode = nil
	intentWithDevice := op(StageIntent)
	intentWithDevice.Device = ptr[uint64](1)
	moved := op(StageOwned)
	moved.Inode = ptr[uint64](99)
	otherPath := op(StageOwned)
	otherPath.StagePath = "/data/artifacts/.stage-other"
	cases := []struct {
		name       string
		prev, next *PrepareOperation
		want       error
	}{
		{"create Intent", nil, op(StageIntent), nil},
		{"create Owned", nil, op(StageOwned), store.ErrIllegalTransition},
		{"Intent with device", nil, intentWithDevice, store.ErrInvalidRecord},
		{"Intent to Owned", op(StageIntent), op(StageOwned), nil},
		{"Owned without inode", op(StageIntent), ownedNoInode, store.ErrMissingEvidence},
		{"Owned back to Intent", op(StageOwned), op(StageIntent), store.ErrIllegalTransition},
		{"Owned identity replaced", op(StageOwned), moved, store.ErrEvidenceChanged},
		{"stage path changed", op(StageIntent), otherPath, store.ErrEvidenceChanged},
		{"Owned rewritten", op(StageOwned), op(StageOwned), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckPrepareOperation(c.prev, c.next), c.want) })
	}
}

func TestArtifactTransitions(t *testing.T) {
	moved := artifact(ArtifactAvailable)
	moved.Path = "/elsewhere"
	cases := []struct {
		name       string
		prev, next *PreparedArtifact
		leased     bool
		want       error
	}{
		{"create Available", nil, artifact(ArtifactAvailable), false, nil},
		{"create Reclaiming", nil, artifact(ArtifactReclaiming), false, store.ErrIllegalTransition},
		{"reclaim unleased", artifact(ArtifactAvailable), artifact(ArtifactReclaiming), false, nil},
		{"reclaim leased", artifact(ArtifactAvailable), artifact(ArtifactReclaiming), true, store.ErrIllegalTransition},
		{"Reclaiming back to Available", artifact(ArtifactReclaiming), artifact(ArtifactAvailable), false, store.ErrIllegalTransition},
		{"path changed", artifact(ArtifactAvailable), moved, false, store.ErrEvidenceChanged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckArtifact(c.prev, c.next, c.leased), c.want) })
	}
}

func TestCatalogFlow(t *testing.T) {
	root := t.TempDir()
	if _, err := Open(root, Options{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("open of missing catalog = %v", err)
	}
	c, err := Open(root, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lease := ArtifactLease{PreparedArtifactID: d(1), DomainID: ids.DomainID{7}, GenerationID: ids.GenerationID{8}}
	steps := []struct {
		name string
		f    func(tx *Tx) error
		want error
	}{
		{"lease before publish", func(tx *Tx) error { return tx.AcquireLease(lease) }, store.ErrNotFound},
		{"record Intent", func(tx *Tx) error { return tx.PutOperation(*op(StageIntent)) }, nil},
		{"publish Intent", func(tx *Tx) error {
			_, err := tx.Publish(op(StageIntent).OperationID, "/data/artifacts/01dd")
			return err
		}, store.ErrIllegalTransition},
		{"own the stage", func(tx *Tx) error { return tx.PutOperation(*op(StageOwned)) }, nil},
		{"publish", func(tx *Tx) error {
			_, err := tx.Publish(op(StageIntent).OperationID, "/data/artifacts/01dd")
			return err
		}, nil},
		{"operation removed by publish", func(tx *Tx) error { _, err := tx.Operation(op(StageIntent).OperationID); return err }, store.ErrNotFound},
		{"second operation for the same artifact", func(tx *Tx) error {
			o := op(StageIntent)
			o.OperationID = ids.OperationID{0x0f}
			if err := tx.PutOperation(*o); err != nil {
				return err
			}
			o = op(StageOwned)
			o.OperationID = ids.OperationID{0x0f}
			return tx.PutOperation(*o)
		}, nil},
		{"publish onto an existing artifact", func(tx *Tx) error { _, err := tx.Publish(ids.OperationID{0x0f}, "/data/artifacts/01dd"); return err }, store.ErrExists},
		{"lease", func(tx *Tx) error { return tx.AcquireLease(lease) }, nil},
		{"lease twice", func(tx *Tx) error { return tx.AcquireLease(lease) }, store.ErrExists},
		{"reclaim leased", func(tx *Tx) error { return tx.SetArtifactState(d(1), ArtifactReclaiming) }, store.ErrIllegalTransition},
		{"delete Available", func(tx *Tx) error { return tx.DeleteArtifact(d(1), proof) }, store.ErrIllegalTransition},
		{"release lease", func(tx *Tx) error { return tx.ReleaseLease(lease) }, nil},
		{"release lease twice", func(tx *Tx) error { return tx.ReleaseLease(lease) }, store.ErrNotFound},
		{"reclaim", func(tx *Tx) error { return tx.SetArtifactState(d(1), ArtifactReclaiming) }, nil},
		{"lease a Reclaiming artifact", func(tx *Tx) error { return tx.AcquireLease(lease) }, store.ErrIllegalTransition},
		{"delete without proof", func(tx *Tx) error { return tx.DeleteArtifact(d(1), nil) }, store.ErrAbsenceProofRequired},
		{"delete", func(tx *Tx) error { return tx.DeleteArtifact(d(1), proof) }, nil},
		{"delete operation without proof", func(tx *Tx) error { return tx.DeleteOperation(ids.OperationID{0x0f}, nil) }, store.ErrAbsenceProofRequired},
		{"delete operation", func(tx *Tx) error { return tx.DeleteOperation(ids.OperationID{0x0f}, proof) }, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) { wantErr(t, c.Update(s.f), s.want) })
	}
	var contents Contents
	if err := c.View(func(tx *Tx) error { var e error; contents, e = tx.Scan(); return e }); err != nil {
		t.Fatal(err)
	}
	if len(contents.Artifacts)+len(contents.Leases)+len(contents.Operations) != 0 {
		t.Fatalf("catalog not empty: %+v", contents)
	}
}

func TestCatalogRefusesDomainStore(t *testing.T) {
	root := t.TempDir()
	db, err := store.Open(Path(root), store.DomainStoreSchema, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(root, Options{}); !errors.Is(err, store.ErrSchema) {
		t.Fatalf("= %v, want ErrSchema", err)
	}
}

func FuzzCatalogRecordsDecode(f *testing.F) {
	for _, v := range []any{*op(StageIntent), *op(StageOwned), *artifact(ArtifactAvailable), ArtifactLease{PreparedArtifactID: d(1), DomainID: ids.DomainID{1}, GenerationID: ids.GenerationID{2}}} {
		b, err := codec.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(v any, validate func() error) {
			if err := codec.Unmarshal(b, v); err != nil {
				return
			}
			again, err := codec.Marshal(v)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("accepted non-canonical input %x (re-encoded %x, %v)", b, again, err)
			}
			_ = validate()
		}
		var o PrepareOperation
		check(&o, o.Validate)
		var a PreparedArtifact
		check(&a, a.Validate)
		var l ArtifactLease
		check(&l, l.Validate)
	})
}
