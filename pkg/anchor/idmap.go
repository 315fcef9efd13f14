package anchor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"lazaret.dev/pkg/image/idmap"
)

// Paths of the shadow-utils ID-map helpers (Debian package uidmap) and of
// the subordinate ID files they consult.
const (
	NewUIDMapPath = "/usr/bin/newuidmap"
	NewGIDMapPath = "/usr/bin/newgidmap"
	SubUIDPath    = "/etc/subuid"
	SubGIDPath    = "/etc/subgid"
)

// RootRangeSize is the size of the identity range that root maps into the
// anchor's user namespace: container IDs 0..65535 are the same host IDs.
const RootRangeSize = 65536

// ErrIDMap means an ID map cannot be used for an anchor; the wrapping error
// says which rule it breaks.
var ErrIDMap = errors.New("unusable user-namespace ID map")

// MapMethod says who writes the anchor's ID map.
type MapMethod int

const (
	// MapDirect: the Host Coordinator writes uid_map and gid_map itself.
	// For an unprivileged caller this is only possible for the single-ID
	// map, and setgroups is denied in the namespace; root may write any
	// map, and setgroups stays allowed.
	MapDirect MapMethod = iota
	// MapHelper: newuidmap and newgidmap write a map with subordinate
	// ranges after the anchor starts; setgroups stays allowed.
	MapHelper
)

func (m MapMethod) String() string {
	switch m {
	case MapDirect:
		return "direct"
	case MapHelper:
		return "newuidmap/newgidmap"
	}
	return fmt.Sprintf("MapMethod(%d)", int(m))
}

// IDMapHost is what the choice of an ID map depends on.
type IDMapHost struct {
	UID, GID uint32
	// UserName is the caller's login name; subordinate entries may name
	// the user or give the UID in decimal.
	UserName string
	// SubUID and SubGID are the contents of /etc/subuid and /etc/subgid
	// (nil when absent).
	SubUID, SubGID []byte
	// Helpers reports whether newuidmap and newgidmap are installed.
	Helpers bool
}

// ChooseIDMap picks the anchor's ID map:
//
//   - root (UID 0): the identity range 0..65535 for UIDs and GIDs;
//   - a caller with a subordinate UID range and a subordinate GID range and
//     the helpers installed: container 0 is the caller, container IDs from 1
//     map onto the first subordinate range of each kind;
//   - anyone else: the single-ID map, container 0 is the caller.
func ChooseIDMap(h IDMapHost) (idmap.Map, error) {
	if h.UID == 0 {
		return idmap.Map{
			UIDs: []idmap.Range{{Container: 0, Host: 0, Size: RootRangeSize}},
			GIDs: []idmap.Range{{Container: 0, Host: 0, Size: RootRangeSize}},
		}, nil
	}
	single := idmap.Single(h.UID, h.GID)
	if !h.Helpers {
		return single, nil
	}
	su, err := subordinate(h.SubUID, h.UserName, h.UID)
	if err != nil {
		return idmap.Map{}, fmt.Errorf("reading %s: %w", SubUIDPath, err)
	}
	sg, err := subordinate(h.SubGID, h.UserName, h.UID)
	if err != nil {
		return idmap.Map{}, fmt.Errorf("reading %s: %w", SubGIDPath, err)
	}
	if su == nil || sg == nil {
		return single, nil
	}
	m := idmap.Map{
		UIDs: []idmap.Range{{Container: 0, Host: h.UID, Size: 1}, {Container: 1, Host: su.start, Size: su.count}},
		GIDs: []idmap.Range{{Container: 0, Host: h.GID, Size: 1}, {Container: 1, Host: sg.start, Size: sg.count}},
	}
	if err := m.Validate(); err != nil {
		return idmap.Map{}, fmt.Errorf("subordinate ranges of %q: %w", h.UserName, err)
	}
	return m, nil
}

type subRange struct{ start, count uint32 }

// subordinate returns the first entry of a subuid or subgid file that names
// the user or its UID, nil when there is none. Malformed lines for the user
// are errors; lines for others are not read further.
func subordinate(file []byte, name string, uid uint32) (*subRange, error) {
	id := strconv.FormatUint(uint64(uid), 10)
	sc := bufio.NewScanner(bytes.NewReader(file))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		owner, rest, ok := strings.Cut(line, ":")
		if !ok || (owner != id && (name == "" || owner != name)) {
			continue
		}
		startText, countText, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want owner:start:count", n)
		}
		start, err := strconv.ParseUint(startText, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: start %q: %w", n, startText, err)
		}
		count, err := strconv.ParseUint(countText, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: count %q: %w", n, countText, err)
		}
		if count == 0 || start+count > 1<<32 || count >= 1<<32-1 {
			return nil, fmt.Errorf("line %d: range %d+%d does not fit 32-bit IDs", n, start, count)
		}
		return &subRange{uint32(start), uint32(count)}, nil
	}
	return nil, sc.Err()
}

// HostIDMap chooses the ID map for the calling process from the live host:
// its effective IDs, /etc/subuid, /etc/subgid and the helpers.
func HostIDMap() (idmap.Map, error) {
	h := IDMapHost{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	if u, err := user.LookupId(strconv.FormatUint(uint64(h.UID), 10)); err == nil {
		h.UserName = u.Username
	}
	h.Helpers = executable(NewUIDMapPath) && executable(NewGIDMapPath)
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{SubUIDPath, &h.SubUID}, {SubGIDPath, &h.SubGID}} {
		b, err := os.ReadFile(f.path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return idmap.Map{}, fmt.Errorf("reading %s: %w", f.path, err)
		}
		*f.dst = b
	}
	return ChooseIDMap(h)
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// MethodFor decides who writes map m for a caller with effective IDs uid
// and gid, and checks the rules every anchor map obeys: it is valid and
// maps container ID 0 (the anchor runs as root of its namespace). An
// unprivileged caller may write only the single-ID map of its own IDs
// itself; any other map needs the helpers, which check /etc/subuid and
// /etc/subgid.
func MethodFor(m idmap.Map, uid, gid uint32) (MapMethod, error) {
	if err := m.Validate(); err != nil {
		return 0, fmt.Errorf("ID map %s: %w: %w", m, ErrIDMap, err)
	}
	if _, ok := m.HostUID(0); !ok {
		return 0, fmt.Errorf("ID map %s does not map container UID 0: %w", m, ErrIDMap)
	}
	if _, ok := m.HostGID(0); !ok {
		return 0, fmt.Errorf("ID map %s does not map container GID 0: %w", m, ErrIDMap)
	}
	if uid == 0 {
		return MapDirect, nil
	}
	c := m.Canonical()
	s := idmap.Single(uid, gid)
	if len(c.UIDs) == 1 && len(c.GIDs) == 1 && c.UIDs[0] == s.UIDs[0] && c.GIDs[0] == s.GIDs[0] {
		return MapDirect, nil
	}
	return MapHelper, nil
}

// helperArgs renders ranges as the triples newuidmap and newgidmap take.
func helperArgs(pid int, rs []idmap.Range) []string {
	args := []string{strconv.Itoa(pid)}
	for _, r := range rs {
		args = append(args,
			strconv.FormatUint(uint64(r.Container), 10),
			strconv.FormatUint(uint64(r.Host), 10),
			strconv.FormatUint(uint64(r.Size), 10))
	}
	return args
}

type idmapRange = idmap.Range
