package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/store/codec"
)

var (
	bucketArtifacts  = []byte("artifacts")  // artifact -> PreparedArtifact
	bucketLeases     = []byte("leases")     // artifact || domain || generation -> ArtifactLease
	bucketOperations = []byte("operations") // operation -> PrepareOperation
	recordBuckets    = [][]byte{bucketArtifacts, bucketLeases, bucketOperations}
)

// Options control opening the catalog.
type Options struct {
	ReadOnly bool
	// Create makes the catalog when it does not exist (never with
	// ReadOnly).
	Create       bool
	LockTimeout  time.Duration
	CheckTimeout time.Duration
}

// Path returns the catalog file of a storage root.
func Path(storageRoot string) string { return filepath.Join(storageRoot, "catalog.db") }

// Catalog is an open Storage Catalog. Several Host Coordinators share one
// catalog, so it is opened for a short sequence of transactions and closed.
type Catalog struct {
	db *store.DB
}

// Open opens the catalog of storageRoot.
func Open(storageRoot string, opts Options) (*Catalog, error) {
	return OpenFile(Path(storageRoot), opts)
}

// OpenFile opens a catalog by file path.
func OpenFile(path string, opts Options) (*Catalog, error) {
	db, err := store.Open(path, store.StorageCatalogSchema, store.Options{
		ReadOnly: opts.ReadOnly, Create: opts.Create && !opts.ReadOnly,
		LockTimeout: opts.LockTimeout, CheckTimeout: opts.CheckTimeout,
		Init: func(tx *bolt.Tx) error {
			for _, b := range recordBuckets {
				if _, err := tx.CreateBucket(b); err != nil {
					return err
				}
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return &Catalog{db: db}, nil
}

// Close closes the catalog.
func (c *Catalog) Close() error { return c.db.Close() }

// Path is the catalog file.
func (c *Catalog) Path() string { return c.db.Path() }

// Tx is a catalog transaction; a refused write returns *store.RecordError
// and, returned from Update's function, rolls back the transaction.
type Tx struct {
	tx   *bolt.Tx
	path string
}

// View runs fn read-only.
func (c *Catalog) View(fn func(tx *Tx) error) error {
	return c.db.View(func(b *bolt.Tx) error { return fn(&Tx{tx: b, path: c.db.Path()}) })
}

// Update runs fn read-write, committed with fsync when fn returns nil.
func (c *Catalog) Update(fn func(tx *Tx) error) error {
	return c.db.Update(func(b *bolt.Tx) error { return fn(&Tx{tx: b, path: c.db.Path()}) })
}

func (tx *Tx) bucket(name []byte) (*bolt.Bucket, error) {
	b := tx.tx.Bucket(name)
	if b == nil {
		return nil, &store.DamageError{Path: tx.path, Reason: fmt.Sprintf("bucket %q is missing", name)}
	}
	return b, nil
}

func (tx *Tx) get(bucket, key []byte, what string, v any) (bool, error) {
	b, err := tx.bucket(bucket)
	if err != nil {
		return false, err
	}
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := codec.Unmarshal(raw, v); err != nil {
		return true, &store.RecordError{Record: what, Key: fmt.Sprintf("key %x", key), Class: store.ErrInvalidRecord, Err: err}
	}
	return true, nil
}

func (tx *Tx) put(bucket, key []byte, v any) error {
	b, err := tx.bucket(bucket)
	if err != nil {
		return err
	}
	raw, err := codec.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

func (tx *Tx) del(bucket, key []byte) error {
	b, err := tx.bucket(bucket)
	if err != nil {
		return err
	}
	return b.Delete(key)
}

func leaseKey(l ArtifactLease) []byte {
	k := make([]byte, 0, 80)
	k = append(k, l.PreparedArtifactID[:]...)
	k = append(k, l.DomainID[:]...)
	return append(k, l.GenerationID[:]...)
}

// Operation returns a prepare operation; store.ErrNotFound when absent.
func (tx *Tx) Operation(id ids.OperationID) (PrepareOperation, error) {
	var o PrepareOperation
	found, err := tx.get(bucketOperations, id[:], "prepare operation", &o)
	if err == nil && !found {
		err = &store.RecordError{Record: "prepare operation", Key: "operation " + id.String(), Class: store.ErrNotFound}
	}
	if err == nil {
		err = o.Validate()
	}
	if err == nil && o.OperationID != id {
		err = invalid("prepare operation", "operation "+id.String(), "operation_id", "row names another operation")
	}
	return o, err
}

// PutOperation writes o after CheckPrepareOperation.
func (tx *Tx) PutOperation(o PrepareOperation) error {
	prev, err := tx.Operation(o.OperationID)
	var prevp *PrepareOperation
	switch {
	case err == nil:
		prevp = &prev
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := CheckPrepareOperation(prevp, &o); err != nil {
		return err
	}
	return tx.put(bucketOperations, o.OperationID[:], o)
}

// DeleteOperation removes an operation once its stage is proven absent
// (abandoned-stage recovery, or a failed preparation).
func (tx *Tx) DeleteOperation(id ids.OperationID, proof *store.AbsenceProof) error {
	o, err := tx.Operation(id)
	if err != nil {
		return err
	}
	if !proof.Valid() {
		return refuse(store.ErrAbsenceProofRequired, "prepare operation", o.Key(), "", "deleting an operation requires proof that its stage is gone")
	}
	return tx.del(bucketOperations, id[:])
}

// Artifact returns a prepared artifact; store.ErrNotFound when absent.
func (tx *Tx) Artifact(id ids.Digest) (PreparedArtifact, error) {
	var a PreparedArtifact
	found, err := tx.get(bucketArtifacts, id[:], "prepared artifact", &a)
	if err == nil && !found {
		err = &store.RecordError{Record: "prepared artifact", Key: "artifact " + id.String(), Class: store.ErrNotFound}
	}
	if err == nil {
		err = a.Validate()
	}
	if err == nil && a.PreparedArtifactID != id {
		err = invalid("prepared artifact", "artifact "+id.String(), "prepared_artifact_id", "row names another artifact")
	}
	return a, err
}

// Publish turns the Owned operation id into the Available artifact it
// prepared, now at path (the stage renamed into place, so the stage's
// device and inode are the artifact's), and removes the operation, in one
// transaction. An Intent operation cannot publish; an existing artifact
// with that ID is refused (ErrExists) and the operation stays for
// abandoned-stage recovery.
func (tx *Tx) Publish(id ids.OperationID, path string) (PreparedArtifact, error) {
	o, err := tx.Operation(id)
	if err != nil {
		return PreparedArtifact{}, err
	}
	if o.StageState != StageOwned {
		return PreparedArtifact{}, refuse(store.ErrIllegalTransition, "prepare operation", o.Key(), "stage_state", "only an Owned operation can publish, this one is %v", o.StageState)
	}
	a := PreparedArtifact{
		PreparedArtifactID: o.ExpectedArtifactID, SourceIdentity: o.SourceIdentity,
		SelectedManifestDigest: o.SelectedManifestDigest, PolicyID: o.PolicyID, IDMapDigest: o.IDMapDigest,
		Path: path, Device: *o.Device, Inode: *o.Inode, State: ArtifactAvailable,
	}
	if _, err := tx.Artifact(a.PreparedArtifactID); err == nil {
		return a, refuse(store.ErrExists, "prepared artifact", a.Key(), "", "is already published")
	} else if !errors.Is(err, store.ErrNotFound) {
		return a, err
	}
	if err := CheckArtifact(nil, &a, false); err != nil {
		return a, err
	}
	if err := tx.put(bucketArtifacts, a.PreparedArtifactID[:], a); err != nil {
		return a, err
	}
	return a, tx.del(bucketOperations, id[:])
}

// Leased reports whether any lease names artifact id.
func (tx *Tx) Leased(id ids.Digest) (bool, error) {
	b, err := tx.bucket(bucketLeases)
	if err != nil {
		return false, err
	}
	k, _ := b.Cursor().Seek(id[:])
	return k != nil && bytes.HasPrefix(k, id[:]), nil
}

// SetArtifactState moves an artifact to state after CheckArtifact: to
// Reclaiming only while unleased.
func (tx *Tx) SetArtifactState(id ids.Digest, state ArtifactState) error {
	a, err := tx.Artifact(id)
	if err != nil {
		return err
	}
	leased, err := tx.Leased(id)
	if err != nil {
		return err
	}
	next := a
	next.State = state
	if err := CheckArtifact(&a, &next, leased); err != nil {
		return err
	}
	return tx.put(bucketArtifacts, id[:], next)
}

// DeleteArtifact removes a Reclaiming, unleased artifact once its files are
// proven gone.
func (tx *Tx) DeleteArtifact(id ids.Digest, proof *store.AbsenceProof) error {
	a, err := tx.Artifact(id)
	if err != nil {
		return err
	}
	if a.State != ArtifactReclaiming {
		return refuse(store.ErrIllegalTransition, "prepared artifact", a.Key(), "state", "only a Reclaiming artifact is deleted, this one is %v", a.State)
	}
	if leased, err := tx.Leased(id); err != nil {
		return err
	} else if leased {
		return refuse(store.ErrIllegalTransition, "prepared artifact", a.Key(), "", "a leased artifact cannot be deleted")
	}
	if !proof.Valid() {
		return refuse(store.ErrAbsenceProofRequired, "prepared artifact", a.Key(), "", "deleting an artifact requires proof that its files are gone")
	}
	return tx.del(bucketArtifacts, id[:])
}

// Lease returns one lease; store.ErrNotFound when absent.
func (tx *Tx) Lease(l ArtifactLease) (ArtifactLease, error) {
	var got ArtifactLease
	found, err := tx.get(bucketLeases, leaseKey(l), "artifact lease", &got)
	if err == nil && !found {
		err = &store.RecordError{Record: "artifact lease", Key: l.Key(), Class: store.ErrNotFound}
	}
	if err == nil {
		err = got.Validate()
	}
	if err == nil && got != l {
		err = invalid("artifact lease", l.Key(), "", "row names another lease")
	}
	return got, err
}

// AcquireLease records l. The artifact must exist and be Available; a
// lease per (artifact, Domain, generation) exists at most once.
func (tx *Tx) AcquireLease(l ArtifactLease) error {
	if err := l.Validate(); err != nil {
		return err
	}
	a, err := tx.Artifact(l.PreparedArtifactID)
	if err != nil {
		return err
	}
	if a.State != ArtifactAvailable {
		return refuse(store.ErrIllegalTransition, "artifact lease", l.Key(), "", "artifact is %v; only an Available artifact is leased", a.State)
	}
	if _, err := tx.Lease(l); err == nil {
		return refuse(store.ErrExists, "artifact lease", l.Key(), "", "is already held")
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return tx.put(bucketLeases, leaseKey(l), l)
}

// ReleaseLease removes l; store.ErrNotFound when it is not held.
func (tx *Tx) ReleaseLease(l ArtifactLease) error {
	if _, err := tx.Lease(l); err != nil {
		return err
	}
	return tx.del(bucketLeases, leaseKey(l))
}

// Contents is the whole catalog.
type Contents struct {
	Artifacts  []PreparedArtifact
	Leases     []ArtifactLease
	Operations []PrepareOperation
}

// Scan reads and verifies every row: each decodes and validates under its
// key, and every lease names an existing artifact that is Available (a
// Reclaiming artifact is never leased).
func (tx *Tx) Scan() (Contents, error) {
	var c Contents
	states := map[ids.Digest]ArtifactState{}
	if err := tx.forEach(bucketArtifacts, func(k []byte) error {
		if len(k) != 32 {
			return invalid("prepared artifact", fmt.Sprintf("key %x", k), "", "key has the wrong length")
		}
		a, err := tx.Artifact(ids.Digest(k))
		if err != nil {
			return err
		}
		states[a.PreparedArtifactID] = a.State
		c.Artifacts = append(c.Artifacts, a)
		return nil
	}); err != nil {
		return c, err
	}
	if err := tx.forEach(bucketLeases, func(k []byte) error {
		if len(k) != 80 {
			return invalid("artifact lease", fmt.Sprintf("key %x", k), "", "key has the wrong length")
		}
		want := ArtifactLease{PreparedArtifactID: ids.Digest(k[:32]), DomainID: ids.DomainID(k[32:64]), GenerationID: ids.GenerationID(k[64:])}
		l, err := tx.Lease(want)
		if err != nil {
			return err
		}
		switch states[l.PreparedArtifactID] {
		case ArtifactAvailable:
		case ArtifactReclaiming:
			return refuse(store.ErrIllegalTransition, "artifact lease", l.Key(), "", "leases a Reclaiming artifact")
		default:
			return refuse(store.ErrReferenceMismatch, "artifact lease", l.Key(), "prepared_artifact_id", "no such artifact")
		}
		c.Leases = append(c.Leases, l)
		return nil
	}); err != nil {
		return c, err
	}
	err := tx.forEach(bucketOperations, func(k []byte) error {
		if len(k) != 16 {
			return invalid("prepare operation", fmt.Sprintf("key %x", k), "", "key has the wrong length")
		}
		o, err := tx.Operation(ids.OperationID(k))
		if err != nil {
			return err
		}
		c.Operations = append(c.Operations, o)
		return nil
	})
	return c, err
}

func (tx *Tx) forEach(bucket []byte, fn func(k []byte) error) error {
	b, err := tx.bucket(bucket)
	if err != nil {
		return err
	}
	return b.ForEach(func(k, _ []byte) error { return fn(k) })
}
