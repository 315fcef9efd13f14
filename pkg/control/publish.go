package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/sys"
)

// Names under the runtime root. A Domain's published files live in
// <runtime root>/domains/<domain id hex>/.
const (
	DomainsDirName = "domains"
	SocketName     = "control.sock"
	IdentityName   = "identity"
	StagedSuffix   = ".staged"
	// MaxIdentityFileBytes bounds the identity file a client reads.
	MaxIdentityFileBytes = 64 << 10
)

// Paths are the fixed locations of one Domain's control socket and
// identity file, staged and published.
type Paths struct {
	Dir            string
	Socket         string
	Identity       string
	StagedSocket   string
	StagedIdentity string
}

// DomainPaths returns the paths of domain's publication under runtimeRoot.
func DomainPaths(runtimeRoot string, domain ids.DomainID) Paths {
	dir := filepath.Join(runtimeRoot, DomainsDirName, domain.String())
	return Paths{
		Dir:            dir,
		Socket:         filepath.Join(dir, SocketName),
		Identity:       filepath.Join(dir, IdentityName),
		StagedSocket:   filepath.Join(dir, SocketName+StagedSuffix),
		StagedIdentity: filepath.Join(dir, IdentityName+StagedSuffix),
	}
}

// EncodeIdentityFile returns the identity file content: the Postcard
// encoding of pub immediately followed by that of the trust manifest it
// names, after checking that the two agree (protocol.VerifyPublication).
// The manifest travels with the identity because a client cannot verify
// the publication without it and has no other source for it.
func EncodeIdentityFile(pub *protocol.ProtocolPublicationIdentity, manifest *protocol.TrustManifest) ([]byte, error) {
	if err := protocol.VerifyPublication(pub, manifest); err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	a, err := protocol.Encode(pub)
	if err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	b, err := protocol.Encode(manifest)
	if err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	return append(a, b...), nil
}

// DecodeIdentityFile reads what EncodeIdentityFile writes and verifies it:
// both records decode strictly and completely, the manifest is the one the
// publication names, it is correctly signed, and it names the same
// generation and CA certificate (protocol.VerifyPublication).
func DecodeIdentityFile(b []byte) (protocol.ProtocolPublicationIdentity, protocol.TrustManifest, error) {
	var pub protocol.ProtocolPublicationIdentity
	var manifest protocol.TrustManifest
	d := postcard.NewDecoder(b)
	pub.UnmarshalPostcard(d)
	manifest.UnmarshalPostcard(d)
	if err := d.Finish(); err != nil {
		return pub, manifest, fmt.Errorf("identity file: %w", err)
	}
	if err := protocol.VerifyPublication(&pub, &manifest); err != nil {
		return pub, manifest, fmt.Errorf("identity file: %w", err)
	}
	again, err := EncodeIdentityFile(&pub, &manifest)
	if err != nil {
		return pub, manifest, err
	}
	if !bytes.Equal(again, b) {
		return pub, manifest, fmt.Errorf("identity file: %w: not in minimal encoding", ErrPublication)
	}
	return pub, manifest, nil
}

// openDir opens path as an O_PATH directory descriptor, refusing a
// symbolic link as its last component and magic links anywhere.
func openDir(path string) (int, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW
	fd, err := fsroot.OpenNoMagicLinks(unix.AT_FDCWD, path, flags, 0)
	if errors.Is(err, unix.ENOSYS) {
		// openat2 arrived in Linux 5.6; older kernels get the same flags
		// without the magic-link refusal.
		fd, err = sys.Open(path, flags|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// checkPrivateDir requires the directory fd to be owned by uid with no
// permission bits for group or others.
func checkPrivateDir(fd int, path string, uid uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: %q is not a directory", ErrPublication, path)
	}
	if st.Uid != uid {
		return fmt.Errorf("%w: directory %q is owned by uid %d, want %d", ErrPublication, path, st.Uid, uid)
	}
	if st.Mode&0o077 != 0 {
		return fmt.Errorf("%w: directory %q has mode %04o; it must grant nothing to group or others", ErrPublication, path, st.Mode&0o7777)
	}
	return nil
}

// procPath names the entry name of the directory fd through /proc, so that
// bind and connect use a short path (sun_path holds 107 bytes) that
// resolves through the descriptor already opened, not the path string.
func procPath(dirfd int, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
}

// identityAt returns the mount/device/inode identity of dir/name without
// following a symbolic link, and its file type.
func identityAt(dirfd int, name string) (hostid.MountIdentity, uint32, error) {
	fd, err := sys.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return hostid.MountIdentity{}, 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return hostid.MountIdentity{}, 0, err
	}
	id, err := hostid.MountOf(fd)
	return id, st.Mode & unix.S_IFMT, err
}

func syncDir(dirfd int, path string) error {
	fd, err := sys.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %q: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return &os.PathError{Op: "fsync", Path: path, Err: err}
	}
	return nil
}

// Staged is a publication whose socket is bound and listening and whose
// identity file is written, both under their staged names.
type Staged struct {
	Paths        Paths
	Listener     *net.UnixListener
	Socket       hostid.MountIdentity
	IdentityFile hostid.MountIdentity
	dirfd        int
}

// Publication is a published control socket and identity file with the
// exact identities that Withdraw later requires.
type Publication struct {
	Paths        Paths
	Socket       hostid.MountIdentity
	IdentityFile hostid.MountIdentity
}

// Stage creates the Domain directory (0700) when missing, binds and
// listens on the staged socket (mode 0600) and writes the staged identity
// file (mode 0600, fsynced) for pub and manifest. Existing staged names are
// an error: a previous generation's leftovers are recovery's to remove. The
// listener does not unlink anything when closed.
func Stage(p Paths, pub *protocol.ProtocolPublicationIdentity, manifest *protocol.TrustManifest) (*Staged, error) {
	content, err := EncodeIdentityFile(pub, manifest)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating control directory: %w", err)
	}
	dirfd, err := openDir(p.Dir)
	if err != nil {
		return nil, fmt.Errorf("opening control directory: %w", err)
	}
	s := &Staged{Paths: p, dirfd: dirfd}
	if err := s.stage(content); err != nil {
		s.abort()
		return nil, err
	}
	return s, nil
}

func (s *Staged) stage(content []byte) error {
	p := s.Paths
	if err := checkPrivateDir(s.dirfd, p.Dir, uint32(os.Geteuid())); err != nil {
		return err
	}
	if filepath.Dir(p.StagedSocket) != p.Dir || filepath.Dir(p.Socket) != p.Dir ||
		filepath.Dir(p.StagedIdentity) != p.Dir || filepath.Dir(p.Identity) != p.Dir {
		return fmt.Errorf("%w: socket and identity paths must all be entries of %q", ErrPublication, p.Dir)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Net: "unix", Name: procPath(s.dirfd, filepath.Base(p.StagedSocket))})
	if err != nil {
		return fmt.Errorf("binding staged control socket %q: %w", p.StagedSocket, err)
	}
	ln.SetUnlinkOnClose(false)
	s.Listener = ln
	if err := chmodAt(s.dirfd, filepath.Base(p.StagedSocket), unix.S_IFSOCK, 0o600); err != nil {
		return fmt.Errorf("restricting staged control socket %q: %w", p.StagedSocket, err)
	}
	id, _, err := identityAt(s.dirfd, filepath.Base(p.StagedSocket))
	if err != nil {
		return fmt.Errorf("identifying staged control socket %q: %w", p.StagedSocket, err)
	}
	s.Socket = id
	if s.IdentityFile, err = writeStaged(s.dirfd, p.StagedIdentity, content); err != nil {
		return err
	}
	return syncDir(s.dirfd, p.Dir)
}

// chmodAt sets the mode of dir/name, which must be of type kind, without
// following a symbolic link.
func chmodAt(dirfd int, name string, kind uint32, mode uint32) error {
	fd, err := sys.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != kind {
		return fmt.Errorf("%w: file type %o, want %o", ErrPublication, st.Mode&unix.S_IFMT, kind)
	}
	// fchmod refuses O_PATH descriptors; the /proc link reaches the same
	// inode without another path walk.
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
}

func writeStaged(dirfd int, path string, content []byte) (hostid.MountIdentity, error) {
	fd, err := sys.Openat(dirfd, filepath.Base(path), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("creating staged identity file %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if _, err := f.Write(content); err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("writing staged identity file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("syncing staged identity file: %w", err)
	}
	id, err := hostid.MountOf(fd)
	if err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("identifying staged identity file %q: %w", path, err)
	}
	return id, nil
}

// Publish renames the staged socket and then the staged identity file to
// their published names (never replacing an existing entry), syncs the
// directory, and checks that each published name is the staged object. The
// identity file comes last: a client that finds it finds the socket.
func (s *Staged) Publish() (Publication, error) {
	if s.dirfd < 0 {
		return Publication{}, fmt.Errorf("publishing %q: %w", s.Paths.Socket, ErrClosed)
	}
	p := s.Paths
	steps := []struct {
		from, to string
		want     hostid.MountIdentity
	}{
		{p.StagedSocket, p.Socket, s.Socket},
		{p.StagedIdentity, p.Identity, s.IdentityFile},
	}
	for _, st := range steps {
		if err := unix.Renameat2(s.dirfd, filepath.Base(st.from), s.dirfd, filepath.Base(st.to), unix.RENAME_NOREPLACE); err != nil {
			return Publication{}, fmt.Errorf("publishing %q as %q: %w", st.from, st.to, &os.LinkError{Op: "rename", Old: st.from, New: st.to, Err: err})
		}
		got, _, err := identityAt(s.dirfd, filepath.Base(st.to))
		if err != nil {
			return Publication{}, fmt.Errorf("identifying published %q: %w", st.to, err)
		}
		if got != st.want {
			return Publication{}, fmt.Errorf("%w: published %q is %+v, staged %+v", ErrPublication, st.to, got, st.want)
		}
	}
	if err := syncDir(s.dirfd, p.Dir); err != nil {
		return Publication{}, err
	}
	unix.Close(s.dirfd)
	s.dirfd = -1
	return Publication{Paths: p, Socket: s.Socket, IdentityFile: s.IdentityFile}, nil
}

// Abort closes the listener and removes the staged socket and identity
// file when they are still the staged objects.
func (s *Staged) Abort() error {
	if s.dirfd < 0 {
		return nil
	}
	return s.abort()
}

func (s *Staged) abort() error {
	var errs []error
	if s.Listener != nil {
		if err := s.Listener.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing staged listener: %w", err))
		}
	}
	var zero hostid.MountIdentity
	if s.IdentityFile != zero {
		errs = append(errs, removeAt(s.dirfd, s.Paths.StagedIdentity, s.IdentityFile))
	}
	if s.Socket != zero {
		errs = append(errs, removeAt(s.dirfd, s.Paths.StagedSocket, s.Socket))
	}
	unix.Close(s.dirfd)
	s.dirfd = -1
	return errors.Join(errs...)
}

// Withdraw removes the published identity file and then the socket, each
// only when it is still the recorded object (mount ID, device and inode);
// a name that is already gone is fine. It does not close any listener.
func Withdraw(pub Publication) error {
	var errs []error
	for _, f := range []struct {
		path string
		want hostid.MountIdentity
	}{{pub.Paths.Identity, pub.IdentityFile}, {pub.Paths.Socket, pub.Socket}} {
		errs = append(errs, WithdrawFile(f.path, f.want))
	}
	return errors.Join(errs...)
}

// WithdrawFile removes path when it is the object of identity want, and
// does nothing when path does not exist. Recovery uses it with recorded
// staged or published paths and identities.
func WithdrawFile(path string, want hostid.MountIdentity) error {
	dirfd, err := openDir(filepath.Dir(path))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("withdrawing %q: %w", path, err)
	}
	defer unix.Close(dirfd)
	return removeAt(dirfd, path, want)
}

func removeAt(dirfd int, path string, want hostid.MountIdentity) error {
	name := filepath.Base(path)
	got, _, err := identityAt(dirfd, name)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("identifying %q: %w", path, err)
	}
	if got != want {
		return fmt.Errorf("%w: %q is %+v, not the recorded %+v; left in place", ErrPublication, path, got, want)
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("removing %q: %w", path, &os.PathError{Op: "unlink", Path: path, Err: err})
	}
	return syncDir(dirfd, filepath.Dir(path))
}

// ReadIdentityFile reads and verifies the identity file at path. Its
// directory must be private to the invoking user, and the file a regular
// file owned by the user that group and others cannot write.
func ReadIdentityFile(path string) (protocol.ProtocolPublicationIdentity, protocol.TrustManifest, error) {
	var pub protocol.ProtocolPublicationIdentity
	var manifest protocol.TrustManifest
	uid := uint32(os.Geteuid())
	dirfd, err := openDir(filepath.Dir(path))
	if err != nil {
		return pub, manifest, err
	}
	defer unix.Close(dirfd)
	if err := checkPrivateDir(dirfd, filepath.Dir(path), uid); err != nil {
		return pub, manifest, err
	}
	fd, err := sys.Openat(dirfd, filepath.Base(path), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return pub, manifest, fmt.Errorf("opening %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pub, manifest, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return pub, manifest, fmt.Errorf("%w: %q is not a regular file", ErrPublication, path)
	case st.Uid != uid:
		return pub, manifest, fmt.Errorf("%w: %q is owned by uid %d, want %d", ErrPublication, path, st.Uid, uid)
	case st.Mode&0o022 != 0:
		return pub, manifest, fmt.Errorf("%w: %q has mode %04o; group and others must not write it", ErrPublication, path, st.Mode&0o7777)
	case st.Size > MaxIdentityFileBytes:
		return pub, manifest, fmt.Errorf("%w: %q has %d bytes, more than %d", ErrPublication, path, st.Size, MaxIdentityFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxIdentityFileBytes+1))
	if err != nil {
		return pub, manifest, fmt.Errorf("reading %q: %w", path, err)
	}
	if len(b) > MaxIdentityFileBytes {
		return pub, manifest, fmt.Errorf("%w: %q grew beyond %d bytes", ErrPublication, path, MaxIdentityFileBytes)
	}
	return DecodeIdentityFile(b)
}
