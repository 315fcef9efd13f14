package config

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The v1 TOML document as decoded. Pointers tell an absent field from an
// explicit value; the document never leaves this package.
type document struct {
	Schema   *string                `toml:"schema"`
	Storage  *storageDoc            `toml:"storage"`
	Network  *networkDoc            `toml:"network"`
	Profiles map[string]*profileDoc `toml:"profiles"`
}

type storageDoc struct {
	DataRoot *string `toml:"data_root"`
}

type networkDoc struct {
	DefaultAllow []string `toml:"default_allow"`
	DefaultDeny  []string `toml:"default_deny"`
}

type profileDoc struct {
	Image             *string           `toml:"image"`
	IsolateGitignored *bool             `toml:"isolate_gitignored"`
	PersistentDirs    []string          `toml:"persistent_dirs"`
	AllowEgress       []string          `toml:"allow_egress"`
	DenyEgress        []string          `toml:"deny_egress"`
	Readiness         *readinessDoc     `toml:"readiness"`
	Env               map[string]string `toml:"env"`
	Volumes           []*volumeDoc      `toml:"volumes"`
	Escalation        *escalationDoc    `toml:"escalation"`
}

type readinessDoc struct {
	Denied    []*targetDoc `toml:"denied"`
	Permitted []*targetDoc `toml:"permitted"`
	DNS       []*dnsDoc    `toml:"dns"`
}

type targetDoc struct {
	Address *string `toml:"address"`
	Port    *int64  `toml:"port"`
}

type dnsDoc struct {
	Resolver *string `toml:"resolver"`
	Query    *string `toml:"query"`
}

type volumeDoc struct {
	Host      *string `toml:"host"`
	Container *string `toml:"container"`
	Kind      *string `toml:"kind"`
	Access    *string `toml:"access"`
	Create    *bool   `toml:"create"`
}

type escalationDoc struct {
	Enabled     *bool      `toml:"enabled"`
	AutoApprove []*ruleDoc `toml:"auto_approve"`
}

type ruleDoc struct {
	Executable     *string  `toml:"executable"`
	Args           []string `toml:"args"`
	AllowExtraArgs *bool    `toml:"allow_extra_args"`
}

// The v2 TOML document: the v1 shape plus host-name fields. The v1 types
// are embedded (go-toml flattens them, and the shallower readiness field
// wins), so a v1 field is declared once. A v1 document is decoded into the
// v1 types, which refuse the v2 fields, and then widened with v2(); the
// rules read only this shape.
type documentV2 struct {
	Schema   *string                  `toml:"schema"`
	Storage  *storageDoc              `toml:"storage"`
	Network  *networkDocV2            `toml:"network"`
	Profiles map[string]*profileDocV2 `toml:"profiles"`
}

type networkDocV2 struct {
	networkDoc
	AllowHosts []string `toml:"allow_hosts"`
	DenyHosts  []string `toml:"deny_hosts"`
}

type profileDocV2 struct {
	profileDoc
	AllowHosts  []string         `toml:"allow_hosts"`
	DenyHosts   []string         `toml:"deny_hosts"`
	Resolver    *string          `toml:"resolver"`
	Readiness   *readinessDocV2  `toml:"readiness"`
	Credentials []*credentialDoc `toml:"credentials"`
}

type credentialDoc struct {
	Env        *string  `toml:"env"`
	Hosts      []string `toml:"hosts"`
	Port       *int64   `toml:"port"`
	Scheme     *string  `toml:"scheme"`
	Header     *string  `toml:"header"`
	UpstreamCA *string  `toml:"upstream_ca"`
}

type readinessDocV2 struct {
	readinessDoc
	Hosts []*hostDoc `toml:"hosts"`
}

type hostDoc struct {
	Name *string `toml:"name"`
	Port *int64  `toml:"port"`
}

// v2 widens a decoded v1 document; every v2 field is absent.
func (d *document) v2() *documentV2 {
	out := &documentV2{Schema: d.Schema, Storage: d.Storage}
	if d.Network != nil {
		out.Network = &networkDocV2{networkDoc: *d.Network}
	}
	if d.Profiles != nil {
		out.Profiles = make(map[string]*profileDocV2, len(d.Profiles))
	}
	for name, pd := range d.Profiles {
		if pd == nil {
			out.Profiles[name] = nil
			continue
		}
		p := &profileDocV2{profileDoc: *pd}
		if pd.Readiness != nil {
			p.Readiness = &readinessDocV2{readinessDoc: *pd.Readiness}
		}
		p.profileDoc.Readiness = nil
		out.Profiles[name] = p
	}
	return out
}

// Closed field sets, by table kind, for the case-sensitivity check. go-toml
// matches struct fields ignoring case; v1 has no aliases, so a key that only
// matches that way is refused.
var closedFields = map[string][]string{
	"root":       {"schema", "storage", "network", "profiles"},
	"storage":    {"data_root"},
	"network":    {"default_allow", "default_deny"},
	"profile":    {"image", "isolate_gitignored", "persistent_dirs", "allow_egress", "deny_egress", "readiness", "env", "volumes", "escalation"},
	"readiness":  {"denied", "permitted", "dns"},
	"target":     {"address", "port"},
	"dns":        {"resolver", "query"},
	"volume":     {"host", "container", "kind", "access", "create"},
	"escalation": {"enabled", "auto_approve"},
	"rule":       {"executable", "args", "allow_extra_args"},
}

// closedFieldsV2 are the v1 field sets plus the v2 fields.
var closedFieldsV2 = func() map[string][]string {
	m := maps.Clone(closedFields)
	m["network"] = append(slices.Clone(m["network"]), "allow_hosts", "deny_hosts")
	m["profile"] = append(slices.Clone(m["profile"]), "allow_hosts", "deny_hosts", "resolver", "credentials")
	m["readiness"] = append(slices.Clone(m["readiness"]), "hosts")
	m["host"] = []string{"name", "port"}
	m["credential"] = []string{"env", "hosts", "port", "scheme", "header", "upstream_ca"}
	return m
}()

// tableKind names the closed table that the key path parts (indices
// removed) designate, or "" for an open table (profiles, env) or a value.
func tableKind(parts []string) string {
	switch len(parts) {
	case 0:
		return "root"
	case 1:
		switch parts[0] {
		case "storage", "network":
			return parts[0]
		}
		return ""
	}
	if parts[0] != "profiles" {
		return ""
	}
	rest := parts[2:]
	switch {
	case len(rest) == 0:
		return "profile"
	case len(rest) == 1 && (rest[0] == "readiness" || rest[0] == "escalation"):
		return rest[0]
	case len(rest) == 1 && rest[0] == "volumes":
		return "volume"
	case len(rest) == 1 && rest[0] == "credentials":
		return "credential" // v2 only: v1 has no such closed table
	case len(rest) == 2 && rest[0] == "readiness" && (rest[1] == "denied" || rest[1] == "permitted"):
		return "target"
	case len(rest) == 2 && rest[0] == "readiness" && rest[1] == "dns":
		return "dns"
	case len(rest) == 2 && rest[0] == "readiness" && rest[1] == "hosts":
		return "host"
	case len(rest) == 2 && rest[0] == "escalation" && rest[1] == "auto_approve":
		return "rule"
	}
	return ""
}

// position is a 1-based line and byte column.
type position struct{ line, col int }

// positionIndex maps field paths to where their key (or array element)
// appears in the document.
type positionIndex struct {
	data   []byte
	at     map[string]position
	arrays map[string]int
	lines  []int // offsets at which lines start
}

func (ix *positionIndex) locate(f fieldPath) (int, int) {
	if ix == nil {
		return 0, 0
	}
	for {
		if p, ok := ix.at[f.String()]; ok {
			return p.line, p.col
		}
		parent, ok := f.parent()
		if !ok {
			return 0, 0
		}
		f = parent
	}
}

func (ix *positionIndex) posOf(off uint32) position {
	if ix.lines == nil {
		ix.lines = []int{0}
		for i, c := range ix.data {
			if c == '\n' {
				ix.lines = append(ix.lines, i+1)
			}
		}
	}
	// The line is the last line start at or before off.
	n, _ := slices.BinarySearch(ix.lines, int(off)+1)
	start := ix.lines[n-1]
	return position{n, int(off) - start + 1}
}

// keyAt returns the deepest field path recorded at p.
func (ix *positionIndex) keyAt(p position) (string, bool) {
	best := ""
	for k, q := range ix.at {
		if q == p && len(k) > len(best) {
			best = k
		}
	}
	return best, best != ""
}

func (ix *positionIndex) record(f fieldPath, off uint32) {
	if _, ok := ix.at[f.String()]; !ok {
		ix.at[f.String()] = ix.posOf(off)
	}
}

// walker builds the position index and reports keys that match a closed
// field only when case is ignored.
type walker struct {
	ix      *positionIndex
	probs   *problems
	fields  map[string][]string // closedFields or closedFieldsV2
	version string              // "v1" or "v2", for messages
}

type seg struct {
	name string
	idx  int // -1 when not an array element
}

func pathOf(segs []seg) fieldPath {
	f := root()
	for _, s := range segs {
		f = f.key(s.name)
		if s.idx >= 0 {
			f = f.index(s.idx)
		}
	}
	return f
}

func namesOf(segs []seg) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s.name
	}
	return out
}

// checkKey reports an alias when name, under the table at parent, matches a
// closed field only when case is ignored.
func (w *walker) checkKey(parent []seg, name string, off uint32) {
	fields := w.fields[tableKind(namesOf(parent))]
	for _, f := range fields {
		if f == name {
			return
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f, name) {
			p := w.ix.posOf(off)
			full := append(append([]seg(nil), parent...), seg{name, -1})
			w.probs.addAt(p.line, p.col, pathOf(full).String(), RuleFieldAlias,
				"keys are case-sensitive and "+w.version+" has no aliases; write "+quoteKey(f))
			return
		}
	}
}

// resolveParts turns header or dotted key parts into segments, entering the
// last element of every array of tables on the way.
func (w *walker) resolveParts(base []seg, keys []*unstable.Node) []seg {
	out := append([]seg(nil), base...)
	for _, k := range keys {
		w.checkKey(out, string(k.Data), k.Raw.Offset)
		out = append(out, seg{string(k.Data), -1})
		if n, ok := w.ix.arrays[pathOf(out).String()]; ok {
			out[len(out)-1].idx = n - 1
		}
		w.ix.record(pathOf(out), k.Raw.Offset)
	}
	return out
}

func keyNodes(n *unstable.Node) []*unstable.Node {
	var out []*unstable.Node
	it := n.Key()
	for it.Next() {
		out = append(out, it.Node())
	}
	return out
}

func (w *walker) keyValue(base []seg, kv *unstable.Node) {
	keys := keyNodes(kv)
	path := w.resolveParts(base, keys)
	w.value(path, kv.Value(), keys[0].Raw.Offset)
}

func (w *walker) value(path []seg, v *unstable.Node, fallback uint32) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				w.keyValue(path, c)
			}
		}
	case unstable.Array:
		it := v.Children()
		i := 0
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			elem := append([]seg(nil), path...)
			elem[len(elem)-1].idx = i
			off := c.Raw.Offset
			if c.Raw.Length == 0 {
				off = fallback
			}
			w.ix.record(pathOf(elem), off)
			w.value(elem, c, off)
			i++
		}
	}
}

func (w *walker) walk(data []byte) {
	var p unstable.Parser
	p.Reset(data)
	var current []seg
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			current = w.resolveParts(nil, keyNodes(e))
		case unstable.ArrayTable:
			keys := keyNodes(e)
			parent := w.resolveParts(nil, keys[:len(keys)-1])
			last := keys[len(keys)-1]
			w.checkKey(parent, string(last.Data), last.Raw.Offset)
			arr := append(append([]seg(nil), parent...), seg{string(last.Data), -1})
			key := pathOf(arr).String()
			n := w.ix.arrays[key]
			w.ix.arrays[key] = n + 1
			w.ix.record(pathOf(arr), last.Raw.Offset)
			arr[len(arr)-1].idx = n
			w.ix.record(pathOf(arr), last.Raw.Offset)
			current = arr
		case unstable.KeyValue:
			w.keyValue(current, e)
		}
	}
}

// schemaVersion returns 2 when the root table sets schema to SchemaIDV2
// before any table header, and 1 otherwise. It only picks the shape to
// decode into: every document that does not declare v2 is decoded, checked
// and reported exactly as v1, errors included.
func schemaVersion(data []byte) int {
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			return 1
		case unstable.KeyValue:
			keys := keyNodes(e)
			if len(keys) != 1 || string(keys[0].Data) != "schema" {
				continue
			}
			if v := e.Value(); v.Kind == unstable.String && string(v.Data) == SchemaIDV2 {
				return 2
			}
			return 1
		}
	}
	return 1
}

// parse decodes data strictly. It returns nil with problems recorded when
// the document cannot be decoded; otherwise the document (a v1 document
// widened to the v2 shape), the position index used to locate later
// problems, and the schema version, 1 or 2.
func parse(data []byte, probs *problems) (*documentV2, *positionIndex, int) {
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, n := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		ix := &positionIndex{data: data}
		p := ix.posOf(uint32(off))
		probs.addAt(p.line, p.col, "", RuleEncoding, "the document is not valid UTF-8")
		return nil, nil, 0
	}
	version := schemaVersion(data)
	var v1 document
	var v2 documentV2
	target, fields, name := any(&v1), closedFields, "v1"
	if version == 2 {
		target, fields, name = &v2, closedFieldsV2, "v2"
	}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	decErr := dec.Decode(target)
	var sme *toml.StrictMissingError
	var de *toml.DecodeError
	if !errors.As(decErr, &sme) && errors.As(decErr, &de) {
		line, col := de.Position()
		probs.addAt(line, col, keyString(de.Key()), RuleDecode, strings.TrimPrefix(de.Error(), "toml: "))
		return nil, nil, 0
	}
	ix := &positionIndex{data: data, at: map[string]position{}, arrays: map[string]int{}}
	w := walker{ix: ix, probs: probs, fields: fields, version: name}
	w.walk(data)
	if sme != nil {
		for i := range sme.Errors {
			e := &sme.Errors[i]
			line, col := e.Position()
			field := keyString(e.Key())
			if f, ok := ix.keyAt(position{line, col}); ok {
				field = f
			}
			probs.addAt(line, col, field, RuleUnknownField, "unknown field; "+name+" tables are closed (see docs/CONFIGURATION.md for the fields)")
		}
		return nil, nil, 0
	}
	if decErr != nil {
		probs.addAt(0, 0, "", RuleDecode, decErr.Error())
		return nil, nil, 0
	}
	if !probs.empty() {
		return nil, nil, 0
	}
	if version == 1 {
		return v1.v2(), ix, 1
	}
	return &v2, ix, 2
}

func keyString(k toml.Key) string {
	f := root()
	for _, part := range k {
		f = f.key(part)
	}
	return f.String()
}
