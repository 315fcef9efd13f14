// Package idmap describes the user-namespace ID map that a sandbox runs with
// and that prepared artifacts translate file ownership through, and defines
// its canonical encoding and digest (id_map_digest in the Storage Catalog).
//
// A Map has separate UID and GID range lists. Each range maps Size
// consecutive IDs starting at Container (inside the namespace) to IDs
// starting at Host (outside). A single-ID map sends container ID 0 to the
// invoking user; a subordinate map adds the user's /etc/subuid and
// /etc/subgid ranges.
//
// Canonical encoding, version 1 (all integers unsigned 32-bit big-endian):
//
//	"lazaret-id-map-v1" 0x00
//	uid_range_count  { container host size } ...
//	gid_range_count  { container host size } ...
//
// Ranges appear sorted by container ID, with ranges that continue each other
// in both container and host IDs merged, so equal mappings encode to equal
// bytes however they were written. id_map_digest is SHA-256 of these bytes.
package idmap

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"lazaret.dev/pkg/ids"
)

// Domain separates the encoding from every other Lazaret preimage.
const Domain = "lazaret-id-map-v1"

// ErrInvalid means a map breaks a structural rule; the wrapping error says
// which range and which rule.
var ErrInvalid = errors.New("invalid ID map")

// Range maps Size IDs starting at Container to IDs starting at Host.
type Range struct {
	Container uint32
	Host      uint32
	Size      uint32
}

// Map is a user-namespace ID map.
type Map struct {
	UIDs []Range
	GIDs []Range
}

// Single returns the single-ID map: container ID 0 maps to uid and gid.
func Single(uid, gid uint32) Map {
	return Map{UIDs: []Range{{0, uid, 1}}, GIDs: []Range{{0, gid, 1}}}
}

// Validate checks that both lists are nonempty, that no range is empty or
// overflows 32 bits, and that no two ranges overlap on either side.
func (m Map) Validate() error {
	if err := validate("uid", m.UIDs); err != nil {
		return err
	}
	return validate("gid", m.GIDs)
}

func validate(kind string, rs []Range) error {
	if len(rs) == 0 {
		return fmt.Errorf("%s map has no ranges: %w", kind, ErrInvalid)
	}
	for i, r := range rs {
		if r.Size == 0 {
			return fmt.Errorf("%s range %d has size 0: %w", kind, i, ErrInvalid)
		}
		if uint64(r.Container)+uint64(r.Size) > 1<<32 || uint64(r.Host)+uint64(r.Size) > 1<<32 {
			return fmt.Errorf("%s range %d (%d %d %d) exceeds 32-bit IDs: %w", kind, i, r.Container, r.Host, r.Size, ErrInvalid)
		}
		for j := range i {
			o := rs[j]
			if overlaps(r.Container, r.Size, o.Container, o.Size) {
				return fmt.Errorf("%s ranges %d and %d overlap inside the namespace: %w", kind, j, i, ErrInvalid)
			}
			if overlaps(r.Host, r.Size, o.Host, o.Size) {
				return fmt.Errorf("%s ranges %d and %d overlap on the host: %w", kind, j, i, ErrInvalid)
			}
		}
	}
	return nil
}

func overlaps(a, an, b, bn uint32) bool {
	return uint64(a) < uint64(b)+uint64(bn) && uint64(b) < uint64(a)+uint64(an)
}

// HostUID returns the host UID for container UID id, false when unmapped.
func (m Map) HostUID(id uint32) (uint32, bool) { return lookup(m.UIDs, id) }

// HostGID returns the host GID for container GID id, false when unmapped.
func (m Map) HostGID(id uint32) (uint32, bool) { return lookup(m.GIDs, id) }

func lookup(rs []Range, id uint32) (uint32, bool) {
	for _, r := range rs {
		if id >= r.Container && uint64(id) < uint64(r.Container)+uint64(r.Size) {
			return r.Host + (id - r.Container), true
		}
	}
	return 0, false
}

// canonical returns the ranges sorted by container ID with continuing
// ranges merged.
func canonical(rs []Range) []Range {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b Range) int {
		switch {
		case a.Container < b.Container:
			return -1
		case a.Container > b.Container:
			return 1
		}
		return 0
	})
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if uint64(last.Container)+uint64(last.Size) == uint64(r.Container) &&
				uint64(last.Host)+uint64(last.Size) == uint64(r.Host) {
				last.Size += r.Size
				continue
			}
		}
		merged = append(merged, r)
	}
	return merged
}

// Canonical returns the map in canonical form.
func (m Map) Canonical() Map {
	return Map{UIDs: canonical(m.UIDs), GIDs: canonical(m.GIDs)}
}

// Encode returns the canonical version 1 encoding. The map must be valid.
func (m Map) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := m.Canonical()
	var b bytes.Buffer
	b.WriteString(Domain)
	b.WriteByte(0)
	for _, rs := range [][]Range{c.UIDs, c.GIDs} {
		b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(rs))))
		for _, r := range rs {
			var w [12]byte
			binary.BigEndian.PutUint32(w[0:], r.Container)
			binary.BigEndian.PutUint32(w[4:], r.Host)
			binary.BigEndian.PutUint32(w[8:], r.Size)
			b.Write(w[:])
		}
	}
	return b.Bytes(), nil
}

// Digest returns id_map_digest: SHA-256 of the canonical encoding.
func (m Map) Digest() (ids.Digest, error) {
	enc, err := m.Encode()
	if err != nil {
		return ids.Digest{}, err
	}
	return sha256.Sum256(enc), nil
}

// String renders the map as "uid c:h:n,... gid c:h:n,..." for logs and
// error messages.
func (m Map) String() string {
	var sb strings.Builder
	for i, part := range []struct {
		name string
		rs   []Range
	}{{"uid", m.UIDs}, {"gid", m.GIDs}} {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(part.name)
		for j, r := range part.rs {
			if j == 0 {
				sb.WriteByte(' ')
			} else {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "%d:%d:%d", r.Container, r.Host, r.Size)
		}
	}
	return sb.String()
}
