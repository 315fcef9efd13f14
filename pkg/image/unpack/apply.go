package unpack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/image/idmap"
)

// Whiteout names of the OCI image layer specification.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	xattrPAXPrefix = "SCHILY.xattr."
	keptXattrSpace = "user."
)

// Layer is one uncompressed layer tar stream.
type Layer struct {
	// Digest names the layer in errors and logs (the blob digest).
	Digest string
	// Open returns the uncompressed tar stream. Apply closes it.
	Open func() (io.ReadCloser, error)
}

// Options configure Apply.
type Options struct {
	// IDMap translates owners in the tar to owners on the host. Container
	// ID 0 must be mapped.
	IDMap idmap.Map
	// Logger receives one record per layer; nil discards.
	Logger *slog.Logger
}

// Stats counts what Apply did, for logs and tests.
type Stats struct {
	Entries         int
	Whiteouts       int
	OwnersCollapsed int
	ModeBitsDropped int
	XattrsDropped   int
}

// Apply applies layers in order into the directory root. root is an open
// directory descriptor (O_PATH is enough); Apply does not take ownership of
// it. The directory should be empty and private to the caller: Apply trusts
// that nobody else changes it while it runs.
//
// On a refused entry Apply stops and returns an *EntryError; what was
// written so far stays inside root and is the caller's to discard.
func Apply(ctx context.Context, root *os.File, layers []Layer, opts Options) (Stats, error) {
	if err := opts.IDMap.Validate(); err != nil {
		return Stats{}, fmt.Errorf("unpack ID map: %w", err)
	}
	rootUID, okU := opts.IDMap.HostUID(0)
	rootGID, okG := opts.IDMap.HostGID(0)
	if !okU || !okG {
		return Stats{}, fmt.Errorf("unpack ID map %s does not map container ID 0: %w", opts.IDMap, idmap.ErrInvalid)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &applier{
		root:    int(root.Fd()),
		ids:     opts.IDMap,
		rootUID: rootUID,
		rootGID: rootGID,
		dirs:    map[string]dirMeta{},
		parent:  -1,
	}
	defer a.dropParent()
	for _, l := range layers {
		if err := ctx.Err(); err != nil {
			return a.stats, err
		}
		before := a.stats
		if err := a.layer(ctx, l); err != nil {
			return a.stats, err
		}
		log.Debug("layer applied", "layer", l.Digest,
			"entries", a.stats.Entries-before.Entries,
			"whiteouts", a.stats.Whiteouts-before.Whiteouts)
	}
	if err := a.finishDirs(); err != nil {
		return a.stats, err
	}
	return a.stats, nil
}

// dirMeta is a directory's final metadata, applied after all layers so that
// a read-only directory can still receive later entries.
type dirMeta struct {
	dev, ino uint64
	uid, gid uint32
	mode     uint32
	xattrs   map[string]string
	times    [2]unix.Timespec
	layer    string
	entry    string
}

type applier struct {
	root             int
	ids              idmap.Map
	rootUID, rootGID uint32
	stats            Stats

	dirs     map[string]dirMeta
	dirOrder []string

	// layer-scoped state
	digest string
	seen   map[string]struct{}

	// one cached parent descriptor
	parentPath string
	parent     int
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

func (a *applier) fail(entry string, err error) error {
	return &EntryError{Layer: a.digest, Entry: entry, Err: err}
}

func (a *applier) layer(ctx context.Context, l Layer) (err error) {
	a.digest = l.Digest
	a.seen = map[string]struct{}{}
	a.dropParent()
	rc, err := l.Open()
	if err != nil {
		return a.fail("", fmt.Errorf("opening layer: %w", err))
	}
	defer func() {
		if cerr := rc.Close(); cerr != nil && err == nil {
			err = a.fail("", fmt.Errorf("closing layer: %w", cerr))
		}
	}()
	tr := tar.NewReader(rc)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return a.fail("", fmt.Errorf("%w: %w", ErrCorrupt, err))
		}
		a.stats.Entries++
		if err := a.entry(hdr, tr); err != nil {
			return a.fail(hdr.Name, err)
		}
	}
	// Read to the end so a verifying reader below sees every byte.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return a.fail("", fmt.Errorf("%w: reading past the end of the archive: %w", ErrCorrupt, err))
	}
	return nil
}

// cleanName turns a tar name into a relative path with no empty, "." or
// ".." components; "" names the root.
func cleanName(name string) (string, error) {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return "", ErrBadName
	}
	if len(name) >= unix.PathMax {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadName, unix.PathMax-1)
	}
	if name[0] == '/' {
		return "", ErrAbsolutePath
	}
	parts := strings.Split(name, "/")
	out := parts[:0]
	for _, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", ErrParentComponent
		}
		out = append(out, p)
	}
	return strings.Join(out, "/"), nil
}

func (a *applier) markSeen(rel string) {
	for rel != "" {
		if _, ok := a.seen[rel]; ok {
			return
		}
		a.seen[rel] = struct{}{}
		rel, _ = split(rel)
	}
}

func (a *applier) dropParent() {
	if a.parent >= 0 {
		unix.Close(a.parent)
	}
	a.parent, a.parentPath = -1, ""
}

// parentDir returns a descriptor of directory rel, creating missing
// components as 0700 directories when create is set. The descriptor is
// cached and owned by a; callers must not close it.
func (a *applier) parentDir(rel string, create bool) (int, error) {
	if a.parent >= 0 && a.parentPath == rel {
		return a.parent, nil
	}
	a.dropParent()
	fd, err := openInRoot(a.root, rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil && create && errors.Is(err, unix.ENOENT) {
		fd, err = a.mkdirAll(rel)
	}
	if err != nil {
		return -1, err
	}
	a.parent, a.parentPath = fd, rel
	return fd, nil
}

// mkdirAll walks rel one component at a time from the root, creating
// missing components as 0700 directories. Each step opens a single name
// without following it; a symbolic link met on the way is resolved from
// the root with RESOLVE_IN_ROOT, so the walk costs one call per component
// however deep the path is.
func (a *applier) mkdirAll(rel string) (int, error) {
	parts := strings.Split(rel, "/")
	cur, err := openInRoot(a.root, "", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		sub := strings.Join(parts[:i+1], "/")
		next, err := unix.Openat(cur, p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if merr := unix.Mkdirat(cur, p, 0o700); merr != nil {
				unix.Close(cur)
				return -1, &os.PathError{Op: "mkdirat", Path: sub, Err: merr}
			}
			a.markSeen(sub)
			next, err = unix.Openat(cur, p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		unix.Close(cur)
		if err != nil {
			return -1, &os.PathError{Op: "openat", Path: sub, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, &os.PathError{Op: "fstat", Path: sub, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			cur = next
		case unix.S_IFLNK:
			unix.Close(next)
			cur, err = openInRoot(a.root, sub, unix.O_PATH|unix.O_DIRECTORY)
			if errors.Is(err, unix.ENOENT) {
				// Lazaret does not create directories through links.
				return -1, fmt.Errorf("%w: parent %q is a symbolic link to a missing directory", ErrBadName, sub)
			}
			if err != nil {
				return -1, err
			}
		default:
			unix.Close(next)
			return -1, &os.PathError{Op: "openat", Path: sub, Err: unix.ENOTDIR}
		}
	}
	return cur, nil
}

// owner maps tar IDs to host IDs. IDs outside the map collapse to the
// owner of the container root; exact reports whether each was mapped.
func (a *applier) owner(hdr *tar.Header) (uid, gid uint32, exactU, exactG bool) {
	uid, gid = a.rootUID, a.rootGID
	if hdr.Uid >= 0 && hdr.Uid <= 0xffffffff {
		if h, ok := a.ids.HostUID(uint32(hdr.Uid)); ok {
			uid, exactU = h, true
		}
	}
	if hdr.Gid >= 0 && hdr.Gid <= 0xffffffff {
		if h, ok := a.ids.HostGID(uint32(hdr.Gid)); ok {
			gid, exactG = h, true
		}
	}
	if !exactU || !exactG {
		a.stats.OwnersCollapsed++
	}
	return uid, gid, exactU, exactG
}

// mode returns the permission bits to set: setuid only when the owner was
// mapped exactly, setgid only when the group was.
func (a *applier) mode(hdr *tar.Header, exactU, exactG bool) uint32 {
	m := uint32(hdr.Mode) & 0o7777
	if m&unix.S_ISUID != 0 && !exactU {
		m &^= unix.S_ISUID
		a.stats.ModeBitsDropped++
	}
	if m&unix.S_ISGID != 0 && !exactG {
		m &^= unix.S_ISGID
		a.stats.ModeBitsDropped++
	}
	return m
}

// xattrs returns the user.* extended attributes of hdr; every other
// namespace (security.capability, trusted.*, system.*) is dropped.
func (a *applier) xattrs(hdr *tar.Header) map[string]string {
	var out map[string]string
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, xattrPAXPrefix)
		if !ok {
			continue
		}
		if !strings.HasPrefix(name, keptXattrSpace) {
			a.stats.XattrsDropped++
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = v
	}
	return out
}

func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	dir, base := split(rel)
	switch {
	case base == whiteoutOpaque:
		a.stats.Whiteouts++
		return a.opaque(dir)
	case strings.HasPrefix(base, whiteoutMeta):
		// Other AUFS metadata (.wh..wh.plnk, .wh..wh.aufs) carries nothing
		// for an unpacked tree.
		return nil
	case strings.HasPrefix(base, whiteoutPrefix):
		a.stats.Whiteouts++
		return a.whiteout(dir, strings.TrimPrefix(base, whiteoutPrefix))
	}
	if hdr.Typeflag == tar.TypeGNUSparse || hasSparseRecords(hdr) {
		// A sparse entry can expand a few bytes of layer into any amount
		// of zeros; image builders do not produce them.
		return fmt.Errorf("%w: sparse file", ErrUnsupportedType)
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeChar, tar.TypeBlock:
		return ErrDeviceNode
	case tar.TypeDir, tar.TypeReg, tar.TypeRegA, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default:
		return fmt.Errorf("%w %q", ErrUnsupportedType, hdr.Typeflag)
	}
	if rel == "" {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: the root can only be a directory", ErrBadName)
		}
		return a.recordDir(a.root, "", hdr)
	}
	pfd, err := a.parentDir(dir, true)
	if err != nil {
		return err
	}
	a.markSeen(rel)
	st, err := lstatAt(pfd, base)
	exists := err == nil
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	if exists {
		if hdr.Typeflag == tar.TypeDir && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return a.recordDirAt(pfd, rel, base, hdr)
		}
		if hdr.Typeflag == tar.TypeLink {
			if target, terr := cleanName(hdr.Linkname); terr == nil && target == rel {
				return fmt.Errorf("%w: hard link to itself", ErrLinkOutside)
			}
		}
		if err := removeAt(pfd, base); err != nil {
			return fmt.Errorf("replacing existing entry: %w", err)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			return &os.PathError{Op: "mkdirat", Path: rel, Err: err}
		}
		return a.recordDirAt(pfd, rel, base, hdr)
	case tar.TypeSymlink:
		return a.symlink(pfd, rel, base, hdr)
	case tar.TypeLink:
		return a.hardlink(pfd, rel, base, hdr)
	case tar.TypeFifo:
		return a.fifo(pfd, rel, base, hdr)
	default:
		return a.regular(pfd, rel, base, hdr, r)
	}
}

func hasSparseRecords(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func (a *applier) whiteout(dir, name string) error {
	if name == "" || name == "." || name == ".." || strings.IndexByte(name, '/') >= 0 {
		return fmt.Errorf("%w: whiteout of %q", ErrBadName, name)
	}
	target := name
	if dir != "" {
		target = dir + "/" + name
	}
	if _, same := a.seen[target]; same {
		// A whiteout hides lower layers only, never its own layer.
		return nil
	}
	pfd, err := a.parentDir(dir, false)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := removeAt(pfd, name); err != nil {
		return fmt.Errorf("applying whiteout: %w", err)
	}
	return nil
}

// opaque removes everything in dir that this layer did not itself write.
// A directory this layer wrote keeps only what this layer wrote below it.
func (a *applier) opaque(dir string) error {
	a.markSeen(dir)
	fd, err := openInRoot(a.root, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		// The directory is new in this layer: nothing below to hide.
		_, err = a.parentDir(dir, true)
		return err
	}
	if err != nil {
		return err
	}
	if err := a.prune(fd, dir); err != nil {
		return fmt.Errorf("applying opaque directory: %w", err)
	}
	return nil
}

// prune removes the entries of the open directory fd (named dir) that this
// layer did not write, descending into the directories it did. It closes
// fd.
func (a *applier) prune(fd int, dir string) error {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return &os.PathError{Op: "readdir", Path: dir, Err: err}
	}
	for _, n := range names {
		p := n
		if dir != "" {
			p = dir + "/" + n
		}
		if _, keep := a.seen[p]; !keep {
			if err := removeAt(fd, n); err != nil {
				return err
			}
			continue
		}
		sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "openat", Path: p, Err: err}
		}
		if err := a.prune(sub, p); err != nil {
			return err
		}
	}
	return nil
}

// recordDirAt records the metadata of directory base in pfd, opened
// without following a link.
func (a *applier) recordDirAt(pfd int, rel, base string, hdr *tar.Header) error {
	fd, err := unix.Openat(pfd, base, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	return a.recordDir(fd, rel, hdr)
}

func (a *applier) recordDir(fd int, rel string, hdr *tar.Header) error {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, "", &st, unix.AT_EMPTY_PATH); err != nil {
		return &os.PathError{Op: "fstat", Path: rel, Err: err}
	}
	uid, gid, eu, eg := a.owner(hdr)
	if _, ok := a.dirs[rel]; !ok {
		a.dirOrder = append(a.dirOrder, rel)
	}
	a.dirs[rel] = dirMeta{
		dev: st.Dev, ino: st.Ino,
		uid: uid, gid: gid,
		mode:   a.mode(hdr, eu, eg),
		xattrs: a.xattrs(hdr),
		times:  timespecs(hdr.AccessTime, hdr.ModTime),
		layer:  a.digest,
		entry:  hdr.Name,
	}
	return nil
}

func (a *applier) regular(pfd int, rel, base string, hdr *tar.Header, r io.Reader) error {
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "openat", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	buf := copyBuffers.Get().(*[]byte)
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, r, *buf)
	copyBuffers.Put(buf)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return fmt.Errorf("writing %q: %w", rel, err)
	}
	if err := a.setMeta(fd, rel, hdr, true); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %q: %w", rel, err)
	}
	return nil
}

// setMeta sets owner, mode, user xattrs and times on an open descriptor.
// chown comes first because it clears setuid and setgid.
func (a *applier) setMeta(fd int, rel string, hdr *tar.Header, withXattrs bool) error {
	uid, gid, eu, eg := a.owner(hdr)
	if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
		return a.chownError(rel, uid, gid, err)
	}
	if err := unix.Fchmod(fd, a.mode(hdr, eu, eg)); err != nil {
		return &os.PathError{Op: "fchmod", Path: rel, Err: err}
	}
	if withXattrs {
		for k, v := range a.xattrs(hdr) {
			if err := unix.Fsetxattr(fd, k, []byte(v), 0); err != nil {
				return &os.PathError{Op: "fsetxattr " + k, Path: rel, Err: err}
			}
		}
	}
	if err := futimens(fd, timespecs(hdr.AccessTime, hdr.ModTime)); err != nil {
		return &os.PathError{Op: "futimens", Path: rel, Err: err}
	}
	return nil
}

func (a *applier) chownError(rel string, uid, gid uint32, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: owner %d:%d for %q (an unprivileged user can prepare only with a single-ID map to itself): %w", ErrOwnership, uid, gid, rel, err)
	}
	return &os.PathError{Op: "fchown", Path: rel, Err: err}
}

func (a *applier) symlink(pfd int, rel, base string, hdr *tar.Header) error {
	if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
		return fmt.Errorf("%w: symbolic link target %q", ErrBadName, hdr.Linkname)
	}
	if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
		return &os.PathError{Op: "symlinkat", Path: rel, Err: err}
	}
	uid, gid, _, _ := a.owner(hdr)
	if err := unix.Fchownat(pfd, base, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return a.chownError(rel, uid, gid, err)
	}
	ts := timespecs(hdr.AccessTime, hdr.ModTime)
	if err := unix.UtimesNanoAt(pfd, base, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: rel, Err: err}
	}
	return nil
}

func (a *applier) hardlink(pfd int, rel, base string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil || target == "" {
		return fmt.Errorf("%w: %q", ErrLinkOutside, hdr.Linkname)
	}
	if target == rel {
		return fmt.Errorf("%w: hard link to itself", ErrLinkOutside)
	}
	tdir, tbase := split(target)
	tfd, err := openInRoot(a.root, tdir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrLinkOutside, hdr.Linkname, err)
	}
	defer unix.Close(tfd)
	if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %q does not exist", ErrLinkOutside, hdr.Linkname)
		}
		return &os.PathError{Op: "linkat", Path: rel, Err: err}
	}
	return nil
}

func (a *applier) fifo(pfd int, rel, base string, hdr *tar.Header) error {
	if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
		return &os.PathError{Op: "mknodat", Path: rel, Err: err}
	}
	// Opening a FIFO would block; O_PATH gives a descriptor that fchownat
	// and utimensat accept with AT_EMPTY_PATH, and fchmodat reaches it by
	// name in the private stage right after creation.
	fd, err := unix.Openat(pfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	uid, gid, eu, eg := a.owner(hdr)
	if err := unix.Fchownat(fd, "", int(uid), int(gid), unix.AT_EMPTY_PATH); err != nil {
		return a.chownError(rel, uid, gid, err)
	}
	if err := unix.Fchmodat(pfd, base, a.mode(hdr, eu, eg)&0o777, 0); err != nil {
		return &os.PathError{Op: "fchmodat", Path: rel, Err: err}
	}
	ts := timespecs(hdr.AccessTime, hdr.ModTime)
	if err := unix.UtimesNanoAt(pfd, base, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: rel, Err: err}
	}
	return nil
}

// finishDirs applies recorded directory metadata deepest first. A directory
// that was later removed or replaced (its device and inode no longer match)
// is skipped.
func (a *applier) finishDirs() error {
	a.dropParent()
	if _, ok := a.dirs[""]; !ok {
		// No layer named the root: it gets 0755, owned by the container
		// root, like every container runtime's image root.
		var st unix.Stat_t
		if err := unix.Fstat(a.root, &st); err != nil {
			return &os.PathError{Op: "fstat", Path: ".", Err: err}
		}
		a.dirs[""] = dirMeta{dev: st.Dev, ino: st.Ino, uid: a.rootUID, gid: a.rootGID, mode: 0o755,
			times: [2]unix.Timespec{st.Atim, st.Mtim}}
		a.dirOrder = append(a.dirOrder, "")
	}
	order := append([]string(nil), a.dirOrder...)
	byDepth(order)
	for _, rel := range order {
		m := a.dirs[rel]
		a.digest = m.layer
		fd, err := openInRoot(a.root, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			continue
		}
		if err != nil {
			return a.fail(m.entry, err)
		}
		err = a.finishDir(fd, rel, m)
		unix.Close(fd)
		if err != nil {
			return a.fail(m.entry, err)
		}
	}
	return nil
}

func (a *applier) finishDir(fd int, rel string, m dirMeta) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: rel, Err: err}
	}
	if st.Dev != m.dev || st.Ino != m.ino {
		return nil
	}
	if err := unix.Fchown(fd, int(m.uid), int(m.gid)); err != nil {
		return a.chownError(rel, m.uid, m.gid, err)
	}
	if err := unix.Fchmod(fd, m.mode); err != nil {
		return &os.PathError{Op: "fchmod", Path: rel, Err: err}
	}
	for k, v := range m.xattrs {
		if err := unix.Fsetxattr(fd, k, []byte(v), 0); err != nil {
			return &os.PathError{Op: "fsetxattr " + k, Path: rel, Err: err}
		}
	}
	if err := futimens(fd, m.times); err != nil {
		return &os.PathError{Op: "futimens", Path: rel, Err: err}
	}
	return nil
}
