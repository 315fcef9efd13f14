package domainstore

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/store/codec"
)

// Bucket layout. Keys are raw identifier bytes so that every row of one
// generation shares the generation ID as a prefix.
var (
	bucketDomain       = []byte("domain")       // "domain" -> Domain
	bucketGenerations  = []byte("generations")  // gen -> Generation
	bucketParticipants = []byte("participants") // gen || role byte -> Participant
	bucketSessions     = []byte("sessions")     // gen || session -> Session
	bucketTerminals    = []byte("terminals")    // gen || session -> SessionTerminal
	bucketMailboxes    = []byte("mailboxes")    // gen -> Mailbox
	keyDomain          = []byte("domain")
	recordBuckets      = [][]byte{bucketDomain, bucketGenerations, bucketParticipants, bucketSessions, bucketTerminals, bucketMailboxes}
)

// Options control opening a Domain Store.
type Options struct {
	ReadOnly     bool
	LockTimeout  time.Duration
	CheckTimeout time.Duration
	// Boot overrides the current boot ID (read from the kernel when nil).
	Boot *hostid.BootID
}

func (o Options) storeOptions() store.Options {
	return store.Options{ReadOnly: o.ReadOnly, LockTimeout: o.LockTimeout, CheckTimeout: o.CheckTimeout}
}

// Path returns the Domain Store file of id under a storage root.
func Path(storageRoot string, id ids.DomainID) string {
	return filepath.Join(storageRoot, "domains", id.String()+".db")
}

// Store is an open Domain Store.
type Store struct {
	db     *store.DB
	domain ids.DomainID
	boot   hostid.BootID
}

// Create opens the Domain Store of d under storageRoot, creating it with
// d as its Domain record when it does not exist. An existing store must
// hold exactly d.
func Create(storageRoot string, d Domain, opts Options) (*Store, error) {
	if err := CheckDomain(nil, &d); err != nil {
		return nil, err
	}
	so := opts.storeOptions()
	so.Create = true
	so.Init = func(tx *bolt.Tx) error {
		for _, b := range recordBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		v, err := codec.Marshal(d)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketDomain).Put(keyDomain, v)
	}
	s, err := open(Path(storageRoot, d.DomainID), so, opts)
	if err != nil {
		return nil, err
	}
	if s.domain != d.DomainID {
		s.Close()
		return nil, fmt.Errorf("domain store %q: %w", s.db.Path(), store.ErrReferenceMismatch)
	}
	var got Domain
	if err := s.View(func(tx *Tx) error { var e error; got, e = tx.Domain(); return e }); err != nil {
		s.Close()
		return nil, err
	}
	if got != d {
		s.Close()
		return nil, fmt.Errorf("domain store %q holds profile %q workspace %q, not profile %q workspace %q: %w",
			s.db.Path(), got.ProfileName, got.CanonicalWorkspace, d.ProfileName, d.CanonicalWorkspace, store.ErrExists)
	}
	return s, nil
}

// Open opens the existing Domain Store of id under storageRoot.
func Open(storageRoot string, id ids.DomainID, opts Options) (*Store, error) {
	s, err := open(Path(storageRoot, id), opts.storeOptions(), opts)
	if err != nil {
		return nil, err
	}
	if s.domain != id {
		s.Close()
		return nil, fmt.Errorf("domain store %q holds domain %v: %w", s.db.Path(), s.domain, store.ErrReferenceMismatch)
	}
	return s, nil
}

// OpenFile opens a Domain Store by file path; the Domain record decides
// which Domain it is.
func OpenFile(path string, opts Options) (*Store, error) {
	return open(path, opts.storeOptions(), opts)
}

func open(path string, so store.Options, opts Options) (*Store, error) {
	s := &Store{}
	if opts.Boot != nil {
		s.boot = *opts.Boot
	} else {
		b, err := hostid.CurrentBootID()
		if err != nil {
			return nil, err
		}
		s.boot = b
	}
	db, err := store.Open(path, store.DomainStoreSchema, so)
	if err != nil {
		return nil, err
	}
	s.db = db
	var d Domain
	if err := s.View(func(tx *Tx) error { var e error; d, e = tx.Domain(); return e }); err != nil {
		db.Close()
		return nil, err
	}
	s.domain = d.DomainID
	return s, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Path is the store file.
func (s *Store) Path() string { return s.db.Path() }

// DomainID is the Domain this store belongs to.
func (s *Store) DomainID() ids.DomainID { return s.domain }

// Boot is the boot ID transition checks treat as current.
func (s *Store) Boot() hostid.BootID { return s.boot }

// Tx is a transaction on a Domain Store. Every Put checks its transition
// against the recorded row; a refused Put returns a *store.RecordError,
// and returning it from the Update function rolls back every write of the
// transaction.
type Tx struct {
	tx *bolt.Tx
	s  *Store
}

// View runs fn in a read-only transaction.
func (s *Store) View(fn func(tx *Tx) error) error {
	return s.db.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx, s: s}) })
}

// Update runs fn in a read-write transaction, committed with fsync when fn
// returns nil; any error rolls back everything fn wrote.
func (s *Store) Update(fn func(tx *Tx) error) error {
	return s.db.Update(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx, s: s}) })
}

func (tx *Tx) bucket(name []byte) (*bolt.Bucket, error) {
	b := tx.tx.Bucket(name)
	if b == nil {
		return nil, &store.DamageError{Path: tx.s.db.Path(), Reason: fmt.Sprintf("bucket %q is missing", name)}
	}
	return b, nil
}

// get decodes the row at key into v; found is false when absent.
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

func notFound(what, key string) error {
	return &store.RecordError{Record: what, Key: key, Class: store.ErrNotFound}
}

func genKey(g ids.GenerationID) []byte { return bytes.Clone(g[:]) }

func participantKey(g ids.GenerationID, r Role) []byte { return append(genKey(g), byte(r)) }

func sessionKey(g ids.GenerationID, s ids.SessionID) []byte { return append(genKey(g), s[:]...) }

// Domain returns the Domain record.
func (tx *Tx) Domain() (Domain, error) {
	var d Domain
	found, err := tx.get(bucketDomain, keyDomain, "domain", &d)
	if err != nil {
		return d, err
	}
	if !found {
		return d, &store.DamageError{Path: tx.s.db.Path(), Reason: "the Domain record is missing"}
	}
	if err := d.Validate(); err != nil {
		return d, err
	}
	return d, nil
}

// Generation returns a generation; store.ErrNotFound when absent.
func (tx *Tx) Generation(id ids.GenerationID) (Generation, error) {
	var g Generation
	found, err := tx.get(bucketGenerations, genKey(id), "generation", &g)
	if err == nil && !found {
		err = notFound("generation", generationKey(id))
	}
	if err == nil {
		err = g.Validate()
	}
	if err == nil && g.GenerationID != id {
		err = &store.RecordError{Record: "generation", Key: generationKey(id), Class: store.ErrInvalidRecord, Err: errors.New("row names another generation")}
	}
	return g, err
}

// PutGeneration writes g after CheckGeneration against the recorded row.
func (tx *Tx) PutGeneration(g Generation) error {
	if g.DomainID != tx.s.domain {
		return refuse(store.ErrReferenceMismatch, "generation", generationKey(g.GenerationID), "domain_id", "names domain %v, this store is domain %v", g.DomainID, tx.s.domain)
	}
	prev, err := tx.Generation(g.GenerationID)
	var prevp *Generation
	switch {
	case err == nil:
		prevp = &prev
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := CheckGeneration(prevp, &g); err != nil {
		return err
	}
	return tx.put(bucketGenerations, genKey(g.GenerationID), g)
}

// Participant returns one participant; store.ErrNotFound when absent.
func (tx *Tx) Participant(gen ids.GenerationID, role Role) (Participant, error) {
	var p Participant
	found, err := tx.get(bucketParticipants, participantKey(gen, role), "participant", &p)
	if err == nil && !found {
		err = notFound("participant", generationKey(gen)+" role "+role.String())
	}
	if err == nil {
		err = VerifyParticipant(&p)
	}
	if err == nil && (p.GenerationID != gen || p.Role != role) {
		err = &store.RecordError{Record: "participant", Key: generationKey(gen) + " role " + role.String(), Class: store.ErrInvalidRecord, Err: errors.New("row names another participant")}
	}
	return p, err
}

// PutParticipant writes p after CheckParticipant against the recorded row,
// with proof for a transition to Clean. It also requires that the
// generation exists (and, for a new participant, is not Absent), that a
// Helper's network_sidecar_id is the generation's, and that Network
// readiness evidence names this Domain and the generation's sidecar.
func (tx *Tx) PutParticipant(p Participant, proof *store.AbsenceProof) error {
	gen, err := tx.Generation(p.GenerationID)
	if err != nil {
		return err
	}
	prev, err := tx.Participant(p.GenerationID, p.Role)
	var prevp *Participant
	switch {
	case err == nil:
		prevp = &prev
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := CheckParticipant(prevp, &p, Env{Boot: tx.s.boot, Proof: proof}); err != nil {
		return err
	}
	const rec = "participant"
	if prevp == nil && gen.DurableDecision == PhaseAbsent {
		return refuse(store.ErrIllegalTransition, rec, p.Key(), "", "generation is Absent; no participant can be added")
	}
	if o := p.Ownership; o != nil {
		if h := o.Helper; h != nil && h.NetworkSidecarID != nil && *h.NetworkSidecarID != gen.NetworkSidecarID {
			return refuse(store.ErrReferenceMismatch, rec, p.Key(), "ownership.network_sidecar_id", "is %v, the generation's sidecar is %v", *h.NetworkSidecarID, gen.NetworkSidecarID)
		}
		if n := o.Network; n != nil && n.ReadinessEvidence != nil {
			ev := n.ReadinessEvidence
			if ev.DomainID != tx.s.domain {
				return refuse(store.ErrReferenceMismatch, rec, p.Key(), "ownership.readiness_evidence.domain_id", "names domain %v", ev.DomainID)
			}
			if ev.NetworkSidecarID != gen.NetworkSidecarID {
				return refuse(store.ErrReferenceMismatch, rec, p.Key(), "ownership.readiness_evidence.network_sidecar_id", "names sidecar %v, the generation's sidecar is %v", ev.NetworkSidecarID, gen.NetworkSidecarID)
			}
		}
	}
	return tx.put(bucketParticipants, participantKey(p.GenerationID, p.Role), p)
}

// Session returns one session; store.ErrNotFound when absent.
func (tx *Tx) Session(gen ids.GenerationID, id ids.SessionID) (Session, error) {
	var s Session
	key := generationKey(gen) + " session " + id.String()
	found, err := tx.get(bucketSessions, sessionKey(gen, id), "session", &s)
	if err == nil && !found {
		err = notFound("session", key)
	}
	if err == nil {
		err = s.Validate()
	}
	if err == nil && (s.GenerationID != gen || s.SessionID != id) {
		err = &store.RecordError{Record: "session", Key: key, Class: store.ErrInvalidRecord, Err: errors.New("row names another session")}
	}
	return s, err
}

// PutSession writes s after CheckSession; its generation must exist.
func (tx *Tx) PutSession(s Session) error {
	if _, err := tx.Generation(s.GenerationID); err != nil {
		return err
	}
	prev, err := tx.Session(s.GenerationID, s.SessionID)
	var prevp *Session
	switch {
	case err == nil:
		prevp = &prev
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := CheckSession(prevp, &s); err != nil {
		return err
	}
	return tx.put(bucketSessions, sessionKey(s.GenerationID, s.SessionID), s)
}

// Terminal returns a session's terminal; store.ErrNotFound when absent.
func (tx *Tx) Terminal(gen ids.GenerationID, id ids.SessionID) (SessionTerminal, error) {
	var t SessionTerminal
	key := generationKey(gen) + " session " + id.String()
	found, err := tx.get(bucketTerminals, sessionKey(gen, id), "session terminal", &t)
	if err == nil && !found {
		err = notFound("session terminal", key)
	}
	if err == nil {
		err = VerifySessionTerminal(&t)
	}
	if err == nil && (t.GenerationID != gen || t.SessionID != id) {
		err = &store.RecordError{Record: "session terminal", Key: key, Class: store.ErrInvalidRecord, Err: errors.New("row names another terminal")}
	}
	return t, err
}

// PutTerminal writes t after CheckSessionTerminal (proof for Clean); its
// session must exist.
func (tx *Tx) PutTerminal(t SessionTerminal, proof *store.AbsenceProof) error {
	if _, err := tx.Session(t.GenerationID, t.SessionID); err != nil {
		return err
	}
	prev, err := tx.Terminal(t.GenerationID, t.SessionID)
	var prevp *SessionTerminal
	switch {
	case err == nil:
		prevp = &prev
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := CheckSessionTerminal(prevp, &t, Env{Boot: tx.s.boot, Proof: proof}); err != nil {
		return err
	}
	return tx.put(bucketTerminals, sessionKey(t.GenerationID, t.SessionID), t)
}

// Mailbox returns the generation's mailbox; store.ErrNotFound when absent.
func (tx *Tx) Mailbox(gen ids.GenerationID) (Mailbox, error) {
	var m Mailbox
	found, err := tx.get(bucketMailboxes, genKey(gen), "mailbox", &m)
	if err == nil && !found {
		err = notFound("mailbox", generationKey(gen))
	}
	if err == nil {
		err = m.Validate()
	}
	if err == nil && m.GenerationID != gen {
		err = &store.RecordError{Record: "mailbox", Key: generationKey(gen), Class: store.ErrInvalidRecord, Err: errors.New("row names another generation")}
	}
	return m, err
}

// PutMailbox writes m after CheckMailbox (proof for Clean); its generation
// must exist.
func (tx *Tx) PutMailbox(m Mailbox, proof *store.AbsenceProof) error {
	if _, err := tx.Generation(m.GenerationID); err != nil {
		return err
	}
	prev, err := tx.Mailbox(m.GenerationID)
	var prevp *Mailbox
	switch {
	case err == nil:
		prevp = &prev
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := CheckMailbox(prevp, &m, Env{Boot: tx.s.boot, Proof: proof}); err != nil {
		return err
	}
	return tx.put(bucketMailboxes, genKey(m.GenerationID), m)
}

// GenerationRecords is one generation with every row that belongs to it.
type GenerationRecords struct {
	Generation   Generation
	Participants []Participant
	Sessions     []Session
	Terminals    []SessionTerminal
	Mailbox      *Mailbox
}

// Contents is a whole Domain Store.
type Contents struct {
	Domain      Domain
	Generations []GenerationRecords
}

// Scan reads every row, in key order, decoding and verifying each one
// (VerifyParticipant, VerifySessionTerminal, the record Validate rules) and
// that it belongs to a recorded generation of this Domain. It is the
// recovery scan: the first row that fails stops it with an error naming
// the row.
func (tx *Tx) Scan() (Contents, error) {
	var c Contents
	d, err := tx.Domain()
	if err != nil {
		return c, err
	}
	c.Domain = d
	index := map[ids.GenerationID]int{}
	gb, err := tx.bucket(bucketGenerations)
	if err != nil {
		return c, err
	}
	err = gb.ForEach(func(k, v []byte) error {
		var g Generation
		if len(k) != len(g.GenerationID) {
			return tx.strayKey("generations", k)
		}
		gid := ids.GenerationID(k)
		g, err := tx.Generation(gid)
		if err != nil {
			return err
		}
		if g.DomainID != d.DomainID {
			return refuse(store.ErrReferenceMismatch, "generation", generationKey(gid), "domain_id", "names domain %v", g.DomainID)
		}
		index[gid] = len(c.Generations)
		c.Generations = append(c.Generations, GenerationRecords{Generation: g})
		return nil
	})
	if err != nil {
		return c, err
	}
	owner := func(bucket string, k []byte, n int) (*GenerationRecords, error) {
		if len(k) != n {
			return nil, tx.strayKey(bucket, k)
		}
		i, ok := index[ids.GenerationID(k[:16])]
		if !ok {
			return nil, refuse(store.ErrReferenceMismatch, bucket, fmt.Sprintf("key %x", k), "generation_id", "no such generation")
		}
		return &c.Generations[i], nil
	}
	if err := tx.forEach(bucketParticipants, func(k []byte) error {
		g, err := owner("participants", k, 17)
		if err != nil {
			return err
		}
		p, err := tx.Participant(g.Generation.GenerationID, Role(k[16]))
		if err != nil {
			return err
		}
		g.Participants = append(g.Participants, p)
		return nil
	}); err != nil {
		return c, err
	}
	if err := tx.forEach(bucketSessions, func(k []byte) error {
		g, err := owner("sessions", k, 32)
		if err != nil {
			return err
		}
		s, err := tx.Session(g.Generation.GenerationID, ids.SessionID(k[16:]))
		if err != nil {
			return err
		}
		g.Sessions = append(g.Sessions, s)
		return nil
	}); err != nil {
		return c, err
	}
	if err := tx.forEach(bucketTerminals, func(k []byte) error {
		g, err := owner("terminals", k, 32)
		if err != nil {
			return err
		}
		sid := ids.SessionID(k[16:])
		if _, err := tx.Session(g.Generation.GenerationID, sid); err != nil {
			return err
		}
		t, err := tx.Terminal(g.Generation.GenerationID, sid)
		if err != nil {
			return err
		}
		g.Terminals = append(g.Terminals, t)
		return nil
	}); err != nil {
		return c, err
	}
	err = tx.forEach(bucketMailboxes, func(k []byte) error {
		g, err := owner("mailboxes", k, 16)
		if err != nil {
			return err
		}
		m, err := tx.Mailbox(g.Generation.GenerationID)
		if err != nil {
			return err
		}
		g.Mailbox = &m
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

func (tx *Tx) strayKey(bucket string, k []byte) error {
	return &store.RecordError{Record: bucket, Key: fmt.Sprintf("key %x", k), Class: store.ErrInvalidRecord, Err: errors.New("key has the wrong length for this bucket")}
}

// DeleteGeneration removes a finished generation and all its rows: its
// durable_decision must be Absent, every participant, terminal and the
// mailbox Clean, and every session New, Closed or Failed.
func (tx *Tx) DeleteGeneration(gen ids.GenerationID) error {
	g, err := tx.Generation(gen)
	if err != nil {
		return err
	}
	key := generationKey(gen)
	if g.DurableDecision != PhaseAbsent {
		return refuse(store.ErrIllegalTransition, "generation", key, "durable_decision", "only an Absent generation is deleted, this one is %v", g.DurableDecision)
	}
	var keys [][][]byte // per bucket
	for _, bk := range []struct {
		bucket []byte
		check  func(k []byte) error
	}{
		{bucketParticipants, func(k []byte) error {
			p, err := tx.Participant(gen, Role(k[16]))
			if err == nil && p.State != StateClean {
				err = refuse(store.ErrIllegalTransition, "participant", p.Key(), "state", "is %v; a generation is deleted only when every participant is Clean", p.State)
			}
			return err
		}},
		{bucketSessions, func(k []byte) error {
			s, err := tx.Session(gen, ids.SessionID(k[16:]))
			if err == nil && s.SessionPhase != SessionNew && s.SessionPhase != SessionClosed && s.SessionPhase != SessionFailed {
				err = refuse(store.ErrIllegalTransition, "session", s.Key(), "session_phase", "is %v; a generation is deleted only when no session is live", s.SessionPhase)
			}
			return err
		}},
		{bucketTerminals, func(k []byte) error {
			t, err := tx.Terminal(gen, ids.SessionID(k[16:]))
			if err == nil && t.State != TerminalClean {
				err = refuse(store.ErrIllegalTransition, "session terminal", t.Key(), "state", "is %v; a generation is deleted only when every terminal is Clean", t.State)
			}
			return err
		}},
	} {
		b, err := tx.bucket(bk.bucket)
		if err != nil {
			return err
		}
		var ks [][]byte
		cur := b.Cursor()
		for k, _ := cur.Seek(gen[:]); k != nil && bytes.HasPrefix(k, gen[:]); k, _ = cur.Next() {
			if err := bk.check(k); err != nil {
				return err
			}
			ks = append(ks, bytes.Clone(k))
		}
		keys = append(keys, ks)
	}
	if m, err := tx.Mailbox(gen); err == nil {
		if m.State != StateClean {
			return refuse(store.ErrIllegalTransition, "mailbox", key, "state", "is %v; a generation is deleted only when its mailbox is Clean", m.State)
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for i, bucket := range [][]byte{bucketParticipants, bucketSessions, bucketTerminals} {
		b, _ := tx.bucket(bucket)
		for _, k := range keys[i] {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	mb, _ := tx.bucket(bucketMailboxes)
	if err := mb.Delete(genKey(gen)); err != nil {
		return err
	}
	gb, _ := tx.bucket(bucketGenerations)
	return gb.Delete(genKey(gen))
}
