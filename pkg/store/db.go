package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// Default timeouts.
const (
	DefaultLockTimeout  = 5 * time.Second
	DefaultCheckTimeout = 60 * time.Second
)

// Options control Open.
type Options struct {
	// ReadOnly opens with a shared lock and refuses every write.
	ReadOnly bool
	// Create makes a missing file, with its metadata and whatever Init
	// writes, atomically: the file appears under its name only complete.
	Create bool
	// Init writes the initial rows of a new store, in the transaction that
	// writes its metadata. Used only when the file is created.
	Init func(tx *bolt.Tx) error
	// LockTimeout bounds the wait for the file lock (default 5s).
	LockTimeout time.Duration
	// CheckTimeout bounds the page check (default 60s).
	CheckTimeout time.Duration
}

func (o *Options) defaults() {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}
}

// DB is an open, checked store file.
type DB struct {
	bolt     *bolt.DB
	path     string
	schema   Schema
	readOnly bool
	// reserve keeps Reserve bytes allocated past the end of a writable
	// store's file (reserve.go); nil when read-only.
	reserve *reserve
	// commitFailed is set when a transaction's commit failed.
	commitFailed atomic.Bool
}

// Open opens the store file at path for schema.
//
// The order is fixed so that nothing is written to a file that is not
// known to be a healthy store of this schema: (1) a missing file is
// created only with Create, and then atomically; (2) the two meta pages are
// parsed without bbolt (empty, truncated and foreign files stop here); (3) a
// child process opens the file read-only, compares the metadata record with
// schema before any other row is read, and runs bbolt's page check; (4) only
// then is the file opened, read-write unless ReadOnly, and the metadata is
// compared once more under the lock. Refusals are *DamageError or
// *SchemaError and leave the file byte-for-byte unchanged; a damaged file is
// never reinitialised.
func Open(path string, schema Schema, opts Options) (*DB, error) {
	opts.defaults()
	path = filepath.Clean(path)
	if err := statStore(path); err != nil {
		if !errors.Is(err, ErrNotFound) || !opts.Create || opts.ReadOnly {
			return nil, err
		}
		if err := create(path, schema, opts); err != nil {
			return nil, err
		}
	}
	if err := precheck(path); err != nil {
		return nil, err
	}
	// The state is read before the check: a write between the two makes
	// the recorded state one the file never shows again (verified.go).
	if st, same := unchangedSinceVerified(path); !same {
		forget(path)
		if err := deepCheck(path, schema, opts.LockTimeout, opts.CheckTimeout); err != nil {
			return nil, err
		}
		if st.ino != 0 {
			remember(path, st)
		}
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: opts.ReadOnly, Timeout: opts.LockTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("store file %q: %w (lock not obtained within %v)", path, ErrLocked, opts.LockTimeout)
		}
		return nil, fmt.Errorf("opening store file %q: %w", path, err)
	}
	db := &DB{bolt: bdb, path: path, schema: schema, readOnly: opts.ReadOnly}
	if err := bdb.View(func(tx *bolt.Tx) error { return compareMetadata(path, metadataOf(tx), schema) }); err != nil {
		bdb.Close()
		return nil, err
	}
	if !opts.ReadOnly {
		db.reserve = openReserve(path)
	}
	return db, nil
}

// Check runs the same refusals as Open (header, metadata gate, page check)
// without opening the file for use.
func Check(path string, schema Schema, opts Options) error {
	opts.defaults()
	path = filepath.Clean(path)
	if err := statStore(path); err != nil {
		return err
	}
	if err := precheck(path); err != nil {
		return err
	}
	return deepCheck(path, schema, opts.LockTimeout, opts.CheckTimeout)
}

func metadataOf(tx *bolt.Tx) []byte {
	b := tx.Bucket(metadataBucket)
	if b == nil {
		return nil
	}
	return b.Get(metadataKey)
}

// statStore requires path to be a regular file (not a symlink).
func statStore(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if err == unix.ENOENT {
			return fmt.Errorf("store file %q: %w", path, ErrNotFound)
		}
		return &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("store file %q is not a regular file (mode %#o); refusing to follow or replace it", path, st.Mode)
	}
	return nil
}

func precheck(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return checkHeader(f, path)
}

// create writes a complete new store under a temporary name in the same
// directory and moves it into place with RENAME_NOREPLACE, so that a crash
// leaves either no store or a complete one, and a concurrent creator wins
// cleanly. Directories it creates are 0700, the file 0600.
func create(path string, schema Schema, opts Options) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating store directory: %w", err)
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("creating store file %q: %w", path, err)
	}
	tmp := path + ".creating-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: tmp, Err: err}
	}
	unix.Close(fd)
	keep := false
	defer func() {
		if !keep {
			os.Remove(tmp)
		}
	}()
	bdb, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	if err != nil {
		return fmt.Errorf("initialising store file %q: %w", tmp, err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(metadataBucket)
		if err != nil {
			return err
		}
		v, err := encodeMetadata(schema)
		if err != nil {
			return err
		}
		if err := b.Put(metadataKey, v); err != nil {
			return err
		}
		if opts.Init != nil {
			return opts.Init(tx)
		}
		return nil
	})
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("initialising store file %q: %w", tmp, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); err != nil {
		if err == unix.EEXIST {
			return nil // another process created it first; use theirs
		}
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	keep = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// Path is the store file's path.
func (db *DB) Path() string { return db.path }

// Schema is the schema the store was opened for.
func (db *DB) Schema() Schema { return db.schema }

// ReadOnly reports whether writes are refused.
func (db *DB) ReadOnly() bool { return db.readOnly }

// Close releases the file and its lock. While the lock is still held,
// the file's state after this process's own transactions is recorded as
// verified (verified.go), unless a commit failed.
func (db *DB) Close() error {
	if db.reserve != nil {
		db.reserve.close()
	}
	if db.commitFailed.Load() {
		forget(db.path)
	} else if st, err := stateOf(db.path); err == nil {
		remember(db.path, st)
	} else {
		forget(db.path)
	}
	return db.bolt.Close()
}

// View runs fn in a read-only transaction.
func (db *DB) View(fn func(tx *bolt.Tx) error) error { return db.bolt.View(fn) }

// Update runs fn in a read-write transaction, committed (and fsynced) when
// fn returns nil and rolled back, changing nothing, when it returns an
// error or panics. After a commit that grew the file the reserve past its
// end is allocated again.
func (db *DB) Update(fn func(tx *bolt.Tx) error) error {
	if db.readOnly {
		return fmt.Errorf("store file %q: %w", db.path, ErrReadOnly)
	}
	fnDone := false
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		ferr := fn(tx)
		fnDone = ferr == nil
		return ferr
	})
	if err != nil && fnDone {
		// fn succeeded and the commit did not: what is on disk is no
		// longer what this process verified.
		db.commitFailed.Store(true)
	}
	if db.reserve != nil {
		db.reserve.renew()
	}
	return err
}

// Quarantine moves a damaged store file aside, to
// "<path>.quarantined-<UTC time>", and returns the new path. It runs the
// check first and refuses (ErrNotDamaged) unless the file is damaged; a
// schema mismatch is not damage, so a newer store is never moved aside by
// an older program. It is only ever called on explicit request.
func Quarantine(path string, schema Schema, opts Options) (string, error) {
	opts.defaults()
	path = filepath.Clean(path)
	err := Check(path, schema, opts)
	if err == nil {
		return "", fmt.Errorf("quarantining %q: %w", path, ErrNotDamaged)
	}
	if !errors.Is(err, ErrDamaged) {
		return "", fmt.Errorf("quarantining %q: %w", path, err)
	}
	dst := path + ".quarantined-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE); err != nil {
		return "", &os.LinkError{Op: "rename", Old: path, New: dst, Err: err}
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return dst, err
	}
	return dst, nil
}
