package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk meta page (go.etcd.io/bbolt internal/common): a 16-byte
// page header (id u64, flags u16, count u16, overflow u32) followed by the
// meta: magic u32, version u32, page size u32, flags u32, root bucket
// (root u64, sequence u64), freelist u64, high-water page u64, txid u64,
// checksum u64 (FNV-1a 64 over the 56 meta bytes before it). Fields are
// in host byte order; Lazaret supports little-endian hosts only, as the
// values are written by the same architecture.
const (
	boltPageHeader   = 16
	boltMetaFlag     = 0x04
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltMetaLen      = 64
	boltChecksumFrom = 56
	minPageSize      = 512
	maxPageSize      = 1 << 16
)

type boltMeta struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

// parseMeta validates one meta page at b (which starts at the page).
func parseMeta(b []byte) (boltMeta, error) {
	if len(b) < boltPageHeader+boltMetaLen {
		return boltMeta{}, errors.New("meta page is short")
	}
	le := binary.LittleEndian
	if le.Uint16(b[8:10])&boltMetaFlag == 0 {
		return boltMeta{}, fmt.Errorf("page flags %#x are not a meta page", le.Uint16(b[8:10]))
	}
	m := b[boltPageHeader : boltPageHeader+boltMetaLen]
	if le.Uint32(m[0:4]) != boltMagic {
		return boltMeta{}, fmt.Errorf("magic %#x is not bbolt's", le.Uint32(m[0:4]))
	}
	if v := le.Uint32(m[4:8]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:boltChecksumFrom])
	if h.Sum64() != le.Uint64(m[boltChecksumFrom:]) {
		return boltMeta{}, errors.New("meta checksum mismatch")
	}
	ps := le.Uint32(m[8:12])
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return boltMeta{}, fmt.Errorf("page size %d is not a power of two between %d and %d", ps, minPageSize, maxPageSize)
	}
	return boltMeta{pageSize: ps, pgid: le.Uint64(m[40:48]), txid: le.Uint64(m[48:56])}, nil
}

// checkHeader inspects a store file without bbolt, reading only its two
// meta pages, so that an empty, truncated or foreign file is refused before
// bbolt could initialise it (bbolt initialises a zero-length file) or read
// past its end. It returns a *DamageError for anything bbolt would not open
// as a consistent database.
func checkHeader(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading store file %q: %w", path, err)
	}
	size := st.Size()
	if size == 0 {
		return &DamageError{Path: path, Reason: "file is empty (truncated to zero length)"}
	}
	// Meta page 0 sits at offset 0 and gives the page size; page 1 sits one
	// page further. Each is tried on its own, as bbolt does, because a
	// crash may tear one of them.
	buf := make([]byte, boltPageHeader+boltMetaLen)
	var metas []boltMeta
	var reasons []string
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading store file %q: %w", path, err)
	}
	m0, err0 := parseMeta(buf[:n])
	if err0 == nil {
		metas = append(metas, m0)
	} else {
		reasons = append(reasons, "meta page 0: "+err0.Error())
	}
	pageSizes := []int64{4096}
	if err0 == nil {
		pageSizes = []int64{int64(m0.pageSize)}
	}
	for _, ps := range pageSizes {
		n, err := f.ReadAt(buf, ps)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading store file %q: %w", path, err)
		}
		m1, err1 := parseMeta(buf[:n])
		if err1 == nil {
			metas = append(metas, m1)
		} else {
			reasons = append(reasons, "meta page 1: "+err1.Error())
		}
	}
	if len(metas) == 0 {
		return &DamageError{Path: path, Reason: fmt.Sprintf("not a bbolt database (%s)", joinReasons(reasons))}
	}
	best := metas[0]
	for _, m := range metas[1:] {
		if m.txid > best.txid {
			best = m
		}
	}
	ps := int64(best.pageSize)
	if size%ps != 0 {
		return &DamageError{Path: path, Reason: fmt.Sprintf("file size %d is not a multiple of the page size %d (truncated)", size, ps)}
	}
	if best.pgid < 4 || best.pgid > uint64(size/ps) {
		return &DamageError{Path: path, Reason: fmt.Sprintf("file holds %d pages but its meta page records %d (truncated)", size/ps, best.pgid)}
	}
	return nil
}

func joinReasons(r []string) string {
	s := ""
	for i, x := range r {
		if i > 0 {
			s += "; "
		}
		s += x
	}
	return s
}
