package unpack

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/image/idmap"
	"lazaret.dev/pkg/testgate"
)

var epoch = time.Unix(1700000000, 123456789)

type ent struct {
	name, link string
	typ        byte
	mode       int64
	uid, gid   int
	body       string
	pax        map[string]string
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, mode: 0o644, body: body} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) ent {
	return ent{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}

func tarBytes(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		h := &tar.Header{
			Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: epoch, PAXRecords: e.pax,
			Format: tar.FormatPAX,
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("writing tar header %q: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func layer(digest string, data []byte) Layer {
	return Layer{Digest: digest, Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
}

// sandbox returns a root to unpack into and a sibling directory that must
// stay untouched, holding one file "secret".
func sandbox(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkOutside(t, outside) })
	// Images leave read-only directories that t.TempDir's cleanup cannot
	// empty as an unprivileged user.
	t.Cleanup(func() {
		if err := RemoveTree(root); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("removing root: %v", err)
		}
	})
	return root, outside
}

func checkOutside(t *testing.T, outside string) {
	t.Helper()
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatalf("reading outside directory: %v", err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("outside directory changed: %v", names)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "keep" {
		t.Errorf("outside file changed: %q, %v", b, err)
	}
}

func selfMap() idmap.Map { return idmap.Single(uint32(os.Getuid()), uint32(os.Getgid())) }

func apply(t *testing.T, root string, layers ...[]byte) (Stats, error) {
	t.Helper()
	f, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ls []Layer
	for i, l := range layers {
		ls = append(ls, layer("sha256:"+strings.Repeat(string(rune('a'+i)), 64), l))
	}
	return Apply(context.Background(), f, ls, Options{IDMap: selfMap()})
}

func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestApplyBasic(t *testing.T) {
	root, _ := sandbox(t)
	l := tarBytes(t,
		dir("etc/"),
		file("etc/hostname", "box\n"),
		ent{name: "bin/tool", typ: tar.TypeReg, mode: 0o4755, body: "#!"},
		hardlink("bin/tool2", "bin/tool"),
		symlink("bin/sh", "/bin/busybox"),
		symlink("escape", "../../outside/secret"),
		ent{name: "run/fifo", typ: tar.TypeFifo, mode: 0o640},
		ent{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		file("ro/inside", "x"),
		ent{name: "x/attr", typ: tar.TypeReg, mode: 0o600, body: "a", pax: map[string]string{
			"SCHILY.xattr.user.note":           "hello",
			"SCHILY.xattr.security.capability": "\x01\x00\x00\x02",
		}},
	)
	st, err := apply(t, root, l)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bin/", "bin/sh", "bin/tool", "bin/tool2", "escape", "etc/", "etc/hostname", "ro/", "ro/inside", "run/", "run/fifo", "x/", "x/attr"}
	if got := listTree(t, root); !slices.Equal(got, want) {
		t.Fatalf("tree\n got %v\nwant %v", got, want)
	}
	fi, err := os.Lstat(filepath.Join(root, "bin/tool"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/tool mode %v, want setuid 0755 (owner 0 is mapped)", fi.Mode())
	}
	if !fi.ModTime().Equal(epoch) {
		t.Errorf("bin/tool mtime %v, want %v", fi.ModTime(), epoch)
	}
	fi2, _ := os.Lstat(filepath.Join(root, "bin/tool2"))
	if !os.SameFile(fi, fi2) {
		t.Error("bin/tool2 is not a hard link of bin/tool")
	}
	if target, _ := os.Readlink(filepath.Join(root, "escape")); target != "../../outside/secret" {
		t.Errorf("symlink target %q kept as written", target)
	}
	if fi, _ := os.Lstat(filepath.Join(root, "run/fifo")); fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o640 {
		t.Errorf("run/fifo mode %v", fi.Mode())
	}
	if fi, _ := os.Lstat(filepath.Join(root, "ro")); fi.Mode().Perm() != 0o555 || !fi.ModTime().Equal(epoch) {
		t.Errorf("ro mode %v mtime %v, want 0555 at %v", fi.Mode(), fi.ModTime(), epoch)
	}
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(filepath.Join(root, "x/attr"), "user.note", buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Errorf("user.note xattr = %q, %v", buf[:n], err)
	}
	if _, err := unix.Lgetxattr(filepath.Join(root, "x/attr"), "security.capability", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("security.capability kept: %v", err)
	}
	if fi, _ := os.Lstat(root); fi.Mode().Perm() != 0o755 {
		t.Errorf("root mode %v, want 0755 when no layer names it", fi.Mode())
	}
	if st.XattrsDropped != 1 {
		t.Errorf("XattrsDropped = %d, want 1", st.XattrsDropped)
	}
}

func TestApplyOwnershipCollapse(t *testing.T) {
	root, _ := sandbox(t)
	l := tarBytes(t,
		ent{name: "suid", typ: tar.TypeReg, mode: 0o6755, uid: 4242, gid: 4242, body: "x"},
		ent{name: "sgid-dir/", typ: tar.TypeDir, mode: 0o2775, uid: 0, gid: 4242},
	)
	st, err := apply(t, root, l)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(filepath.Join(root, "suid"))
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("suid mode %v: setuid/setgid must be dropped for unmapped owners", fi.Mode())
	}
	s := fi.Sys().(*syscall.Stat_t)
	if int(s.Uid) != os.Getuid() || int(s.Gid) != os.Getgid() {
		t.Errorf("owner %d:%d, want collapsed to %d:%d", s.Uid, s.Gid, os.Getuid(), os.Getgid())
	}
	fi, _ = os.Lstat(filepath.Join(root, "sgid-dir"))
	if fi.Mode()&os.ModeSetgid != 0 {
		t.Errorf("sgid-dir mode %v: setgid must be dropped for an unmapped group", fi.Mode())
	}
	if st.OwnersCollapsed < 2 || st.ModeBitsDropped != 3 {
		t.Errorf("stats %+v, want 2 collapsed owners, 3 dropped bits", st)
	}
}

func TestApplySubordinateMapAsRoot(t *testing.T) {
	testgate.Root(t)
	root, _ := sandbox(t)
	m := idmap.Map{
		UIDs: []idmap.Range{{Container: 0, Host: 100000, Size: 65536}},
		GIDs: []idmap.Range{{Container: 0, Host: 200000, Size: 65536}},
	}
	l := tarBytes(t,
		ent{name: "home/u/", typ: tar.TypeDir, mode: 0o750, uid: 1000, gid: 1000},
		ent{name: "home/u/f", typ: tar.TypeReg, mode: 0o4750, uid: 1000, gid: 1000, body: "x"},
		ent{name: "home/u/l", typ: tar.TypeSymlink, link: "f", uid: 7, gid: 8},
	)
	f, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Apply(context.Background(), f, []Layer{layer("sha256:l", l)}, Options{IDMap: m}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path     string
		uid, gid uint32
	}{{"home/u", 101000, 201000}, {"home/u/f", 101000, 201000}, {"home/u/l", 100007, 200008}} {
		fi, err := os.Lstat(filepath.Join(root, c.path))
		if err != nil {
			t.Fatal(err)
		}
		s := fi.Sys().(*syscall.Stat_t)
		if s.Uid != c.uid || s.Gid != c.gid {
			t.Errorf("%s owner %d:%d, want %d:%d", c.path, s.Uid, s.Gid, c.uid, c.gid)
		}
	}
	if fi, _ := os.Lstat(filepath.Join(root, "home/u/f")); fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("setuid dropped for a mapped owner: %v", fi.Mode())
	}
}

func TestApplyUnprivilegedOwnership(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may assign any owner; this checks the refusal an unprivileged user gets")
	}
	root, _ := sandbox(t)
	f, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := idmap.Single(uint32(os.Getuid())+1, uint32(os.Getgid())+1)
	_, err = Apply(context.Background(), f, []Layer{layer("sha256:own", tarBytes(t, file("f", "x")))}, Options{IDMap: m})
	var ee *EntryError
	if !errors.Is(err, ErrOwnership) || !errors.As(err, &ee) || ee.Entry != "f" {
		t.Fatalf("error %v, want ErrOwnership naming f", err)
	}
}

func TestApplyWhiteouts(t *testing.T) {
	lower := tarBytes(t,
		dir("a/"), file("a/x", "1"), file("a/y", "2"), dir("a/sub/"), file("a/sub/z", "3"),
		dir("b/"), file("b/deep", "4"), file("c", "5"),
	)
	tests := []struct {
		name  string
		upper []ent
		want  []string
	}{
		{"whiteout file and dir", []ent{file("a/.wh.x", ""), file(".wh.b", "")},
			[]string{"a/", "a/sub/", "a/sub/z", "a/y", "c"}},
		{"whiteout then same-layer file survives", []ent{file("c", "new"), file(".wh.c", "")},
			[]string{"a/", "a/sub/", "a/sub/z", "a/x", "a/y", "b/", "b/deep", "c"}},
		{"whiteout of missing path", []ent{file("nope/.wh.x", ""), file(".wh.nothing", "")},
			[]string{"a/", "a/sub/", "a/sub/z", "a/x", "a/y", "b/", "b/deep", "c"}},
		{"opaque marker first", []ent{dir("a/"), file("a/.wh..wh..opq", ""), file("a/new", "n")},
			[]string{"a/", "a/new", "b/", "b/deep", "c"}},
		{"opaque marker after new entries", []ent{dir("a/"), dir("a/sub/"), file("a/sub/fresh", "f"), file("a/.wh..wh..opq", "")},
			[]string{"a/", "a/sub/", "a/sub/fresh", "b/", "b/deep", "c"}},
		{"opaque on new directory", []ent{file("n/.wh..wh..opq", ""), file("n/f", "")},
			[]string{"a/", "a/sub/", "a/sub/z", "a/x", "a/y", "b/", "b/deep", "c", "n/", "n/f"}},
		{"file replaces directory", []ent{file("b", "now a file")},
			[]string{"a/", "a/sub/", "a/sub/z", "a/x", "a/y", "b", "c"}},
		{"directory replaces file", []ent{dir("c/"), file("c/in", "")},
			[]string{"a/", "a/sub/", "a/sub/z", "a/x", "a/y", "b/", "b/deep", "c/", "c/in"}},
		{"aufs metadata ignored", []ent{file(".wh..wh.plnk", "")},
			[]string{"a/", "a/sub/", "a/sub/z", "a/x", "a/y", "b/", "b/deep", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, _ := sandbox(t)
			if _, err := apply(t, root, lower, tarBytes(t, tt.upper...)); err != nil {
				t.Fatal(err)
			}
			if got := listTree(t, root); !slices.Equal(got, tt.want) {
				t.Fatalf("tree\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestApplyUnsafe(t *testing.T) {
	tests := []struct {
		name   string
		layers func(outside string) [][]ent
		entry  string
		want   error
	}{
		{"absolute path", func(string) [][]ent { return [][]ent{{file("/etc/passwd", "x")}} }, "/etc/passwd", ErrAbsolutePath},
		{"dot-dot escape", func(string) [][]ent { return [][]ent{{file("../outside/pwned", "x")}} }, "../outside/pwned", ErrParentComponent},
		{"dot-dot inside name", func(string) [][]ent { return [][]ent{{file("a/../../x", "x")}} }, "a/../../x", ErrParentComponent},
		{"hard link outside", func(string) [][]ent { return [][]ent{{hardlink("h", "../outside/secret")}} }, "h", ErrLinkOutside},
		{"hard link absolute", func(o string) [][]ent { return [][]ent{{hardlink("h", o+"/secret")}} }, "h", ErrLinkOutside},
		{"hard link through symlink", func(o string) [][]ent {
			return [][]ent{{symlink("s", o), hardlink("h", "s/secret")}}
		}, "h", ErrLinkOutside},
		{"hard link to itself", func(string) [][]ent { return [][]ent{{file("f", "x"), hardlink("f", "f")}} }, "f", ErrLinkOutside},
		{"char device", func(string) [][]ent {
			return [][]ent{{{name: "dev/null", typ: tar.TypeChar, mode: 0o666}}}
		}, "dev/null", ErrDeviceNode},
		{"block device", func(string) [][]ent {
			return [][]ent{{{name: "dev/sda", typ: tar.TypeBlock, mode: 0o660}}}
		}, "dev/sda", ErrDeviceNode},
		{"whiteout of dot-dot", func(string) [][]ent { return [][]ent{{file(".wh...", "")}} }, ".wh...", ErrBadName},
		{"symlink as root", func(string) [][]ent { return [][]ent{{symlink("./", "/")}} }, "./", ErrBadName},
		{"unknown type", func(string) [][]ent { return [][]ent{{{name: "v", typ: 'V'}}} }, "v", ErrUnsupportedType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, outside := sandbox(t)
			var ls [][]byte
			for _, l := range tt.layers(outside) {
				ls = append(ls, tarBytes(t, l...))
			}
			_, err := apply(t, root, ls...)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			var ee *EntryError
			if !errors.As(err, &ee) || ee.Entry != tt.entry || !strings.HasPrefix(ee.Layer, "sha256:") {
				t.Fatalf("error %v does not name layer and entry %q", err, tt.entry)
			}
			if !strings.Contains(err.Error(), ee.Layer) || !strings.Contains(err.Error(), tt.entry) {
				t.Fatalf("message %q lacks layer or entry", err)
			}
		})
	}
}

// Symbolic links never carry a write outside the root: parents resolve
// inside the root and a link as the last component is replaced.
func TestApplySymlinksStayInRoot(t *testing.T) {
	root, outside := sandbox(t)
	l1 := tarBytes(t,
		symlink("abs", "/"),
		symlink("rel", "../../.."),
		symlink("secret", filepath.Join(outside, "secret")),
		dir("d/"),
		symlink("d/up", ".."),
	)
	l2 := tarBytes(t,
		file("abs/pwned-abs", "x"),
		file("rel/pwned-rel", "x"),
		file("d/up/d/up/pwned-up", "x"),
		file("secret", "overwritten"),
		file("rel/.wh.secret", ""),
	)
	if _, err := apply(t, root, l1, l2); err != nil {
		t.Fatal(err)
	}
	want := []string{"abs", "d/", "d/up", "pwned-abs", "pwned-rel", "pwned-up", "rel"}
	if got := listTree(t, root); !slices.Equal(got, want) {
		t.Fatalf("tree\n got %v\nwant %v", got, want)
	}
}

func TestApplyDanglingParent(t *testing.T) {
	root, outside := sandbox(t)
	l := tarBytes(t, symlink("gone", filepath.Join(outside, "missing")), file("gone/x", "x"))
	_, err := apply(t, root, l)
	var ee *EntryError
	if !errors.Is(err, ErrBadName) || !errors.As(err, &ee) || ee.Entry != "gone/x" {
		t.Fatalf("error %v, want ErrBadName naming gone/x", err)
	}
}

// paxSparse hand-writes a PAX extended header announcing a GNU sparse
// file (archive/tar's writer will not), followed by that file's header.
func paxSparse(t *testing.T) []byte {
	t.Helper()
	var recs bytes.Buffer
	for _, kv := range [][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"}, {"GNU.sparse.name", "s"}, {"GNU.sparse.realsize", "1099511627776"}} {
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(rec) + 2
		if n+1 > 99 || len(strconv.Itoa(n)) != 2 {
			t.Fatalf("record %q needs another length width", rec)
		}
		recs.WriteString(strconv.Itoa(n) + rec)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: "PaxHeaders/s", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(recs.Len()), Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	tw.Write(recs.Bytes())
	tw.Flush()
	hdr := b.Bytes()[:512]
	hdr[156] = tar.TypeXHeader
	copy(hdr[148:156], "        ")
	sum := 0
	for _, c := range hdr {
		sum += int(c)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	// The sparse map (one entry: offset 0, length 1) then one data byte.
	body := []byte("1\n0\n1\n")
	if err := tw.WriteHeader(&tar.Header{Name: "s", Typeflag: tar.TypeReg, Mode: 0o644, Size: 513, Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	tw.Write(append(append(body, make([]byte, 512-len(body))...), 'x'))
	tw.Close()
	return b.Bytes()
}

func TestApplyRefusesSparse(t *testing.T) {
	root, _ := sandbox(t)
	_, err := apply(t, root, paxSparse(t))
	var ee *EntryError
	if !errors.Is(err, ErrUnsupportedType) || !errors.As(err, &ee) || ee.Entry != "s" {
		t.Fatalf("error %v, want a refused sparse entry s", err)
	}
}

func TestApplyCorrupt(t *testing.T) {
	root, _ := sandbox(t)
	good := tarBytes(t, file("f", strings.Repeat("x", 2000)))
	tests := map[string][]byte{
		"garbage":   []byte(strings.Repeat("not a tar ", 80)),
		"truncated": good[:2000],
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := apply(t, root, data)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestApplyRejectsMapWithoutRoot(t *testing.T) {
	root, _ := sandbox(t)
	f, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := idmap.Map{UIDs: []idmap.Range{{Container: 1, Host: 1000, Size: 1}}, GIDs: []idmap.Range{{Container: 0, Host: 1000, Size: 1}}}
	if _, err := Apply(context.Background(), f, nil, Options{IDMap: m}); !errors.Is(err, idmap.ErrInvalid) {
		t.Fatalf("error %v, want idmap.ErrInvalid", err)
	}
}

func TestRemoveTreeReadOnly(t *testing.T) {
	root, _ := sandbox(t)
	l := tarBytes(t, ent{name: "ro/", typ: tar.TypeDir, mode: 0o500}, ent{name: "ro/f", typ: tar.TypeReg, mode: 0o400})
	if _, err := apply(t, root, l); err != nil {
		t.Fatal(err)
	}
	if err := RemoveTree(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("root still exists: %v", err)
	}
}
