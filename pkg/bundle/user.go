package bundle

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
)

// ResolveUser resolves an image's User field ("", "name", "uid",
// "name:group", "uid:gid", ...) against /etc/passwd and /etc/group of the
// root filesystem open at rootFd. The files are opened with
// RESOLVE_IN_ROOT, so a symlink in the image cannot make Lazaret read a host
// file. An empty field is root. A numeric user absent from /etc/passwd is
// accepted with GID 0 unless a group is given, as container runtimes do.
func ResolveUser(rootFd int, spec string) (User, error) {
	passwd, err := readInRoot(rootFd, "etc/passwd")
	if err != nil {
		return User{}, err
	}
	group, err := readInRoot(rootFd, "etc/group")
	if err != nil {
		return User{}, err
	}
	return resolveUser(spec, passwd, group)
}

func readInRoot(rootFd int, name string) (string, error) {
	fd, err := fsroot.OpenInRoot(rootFd, name, unix.O_RDONLY|unix.O_NOCTTY, 0)
	if errors.Is(err, unix.ENOENT) {
		return "", nil
	}
	if err != nil {
		return "", &os.PathError{Op: "openat2", Path: "/" + name, Err: errors.Unwrap(err)}
	}
	f := os.NewFile(uintptr(fd), "/"+name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("reading image /%s: not a regular file", name)
	}
	const limit = 4 << 20
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return "", fmt.Errorf("reading image /%s: %w", name, err)
	}
	if len(b) > limit {
		return "", fmt.Errorf("reading image /%s: larger than %d bytes", name, limit)
	}
	return string(b), nil
}

type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

func resolveUser(spec, passwd, group string) (User, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if userPart == "" && hasGroup {
		return User{}, fmt.Errorf("%w: image user %q names a group but no user", ErrInvalid, spec)
	}
	users := parsePasswd(passwd)
	var u User
	var name string
	switch {
	case userPart == "":
		u, name = User{UID: 0, GID: 0, Home: "/root"}, "root"
		for _, e := range users {
			if e.uid == 0 {
				u.Home, name = e.home, e.name
				break
			}
		}
	default:
		found := false
		for _, e := range users {
			if e.name == userPart || strconv.FormatUint(uint64(e.uid), 10) == userPart {
				u, name, found = User{UID: e.uid, GID: e.gid, Home: e.home}, e.name, true
				break
			}
		}
		if !found {
			id, err := strconv.ParseUint(userPart, 10, 32)
			if err != nil {
				return User{}, fmt.Errorf("%w: image user %q is not in the image's /etc/passwd", ErrInvalid, userPart)
			}
			u = User{UID: uint32(id), GID: 0, Home: "/"}
		}
	}
	groups := parseGroup(group)
	if hasGroup {
		gid, ok := lookupGroup(groups, groupPart)
		if !ok {
			return User{}, fmt.Errorf("%w: image group %q is not in the image's /etc/group", ErrInvalid, groupPart)
		}
		u.GID = gid
	}
	if name != "" {
		for _, g := range groups {
			if g.gid != u.GID && g.members[name] {
				u.AdditionalGIDs = append(u.AdditionalGIDs, g.gid)
			}
		}
	}
	return u, nil
}

func parsePasswd(s string) []passwdEntry {
	var out []passwdEntry
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 7 || strings.HasPrefix(f[0], "#") {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5]})
	}
	return out
}

type groupEntry struct {
	name    string
	gid     uint32
	members map[string]bool
}

func parseGroup(s string) []groupEntry {
	var out []groupEntry
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 4 || strings.HasPrefix(f[0], "#") {
			continue
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		m := map[string]bool{}
		for _, n := range strings.Split(f[3], ",") {
			if n != "" {
				m[n] = true
			}
		}
		out = append(out, groupEntry{name: f[0], gid: uint32(gid), members: m})
	}
	return out
}

func lookupGroup(groups []groupEntry, g string) (uint32, bool) {
	for _, e := range groups {
		if e.name == g {
			return e.gid, true
		}
	}
	id, err := strconv.ParseUint(g, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(id), true
}
