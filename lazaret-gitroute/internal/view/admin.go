package view

import (
	"strings"
)

// Rule is what the view lets the sandbox do at a path.
type Rule uint8

const (
	// Free is a work-tree path: the ordinary rules apply.
	Free Rule = iota
	// Admin is an allowlisted entry of a repository's administrative
	// area (objects, refs, logs, index, HEAD, ...): it may be written,
	// created, renamed and removed within its area, but no symbolic link,
	// FIFO, socket or device node may be made there.
	Admin
	// Sealed is read-only: every change fails with EROFS, whether the
	// path exists or not. It is every administrative entry outside the
	// allowlist (config, hooks, info, commondir, ...), the administrative
	// directory itself, and a tracked file named HEAD in the work tree.
	Sealed
)

func (r Rule) String() string {
	switch r {
	case Admin:
		return "admin"
	case Sealed:
		return "sealed"
	}
	return "free"
}

// Repos is the repository layout the view freezes at generation start.
// The top-level ".git" directory is always an administrative area.
type Repos struct {
	// Nested holds the work-tree directories (view paths) whose ".git"
	// (a directory, or a gitfile) existed at generation start.
	Nested map[string]bool
	// Modules holds the administrative directories below .git/modules
	// (view paths such as ".git/modules/lib") present at generation start.
	Modules map[string]bool
	// Bare holds the work-tree directories that held a tracked file named
	// HEAD at generation start: git may take such a directory for a bare
	// repository, so it is an administrative area too, and the sandbox
	// cannot change the config, hooks or commondir git would read there.
	Bare map[string]bool
}

// Tracker says whether a path is in the frozen index.
type Tracker interface {
	Tracked(path string, isDir bool) bool
}

// place is where a path stands with respect to the repositories.
type place struct {
	// area is the administrative directory holding the path ("" when the
	// path is in a work tree), rel the path relative to it.
	area, rel string
	// foreign means the path is, or is below, a ".git" the sandbox
	// made, or an untracked entry named HEAD: it is served from the
	// isolated root, so that the host never finds a repository there.
	foreign bool
	// sealedHead means the path is a tracked file named HEAD.
	sealedHead bool
}

// sequencerDirs hold the state of an interrupted rebase, cherry-pick or
// revert, whose todo lists carry exec lines that `git rebase --continue`
// on the host would run. They are served from the isolated root.
var sequencerDirs = map[string]bool{"rebase-merge": true, "rebase-apply": true, "sequencer": true}

// adminFiles are the allowlisted plain files at the top of an
// administrative area; each may also be written as "<name>.lock".
var adminFiles = map[string]bool{
	"index": true, "HEAD": true, "ORIG_HEAD": true, "FETCH_HEAD": true, "AUTO_MERGE": true,
	"CHERRY_PICK_HEAD": true, "REVERT_HEAD": true, "REBASE_HEAD": true,
	"COMMIT_EDITMSG": true, "SQUASH_MSG": true, "packed-refs": true,
	"gc.pid": true, "gc.log": true,
}

// adminRule classifies rel, a path relative to an administrative
// directory, by the allowlist.
func adminRule(rel string) Rule {
	if rel == "" {
		return Sealed
	}
	top, rest, _ := strings.Cut(rel, "/")
	switch top {
	case "objects":
		if rest == "info/alternates" || rest == "info/http-alternates" ||
			strings.HasPrefix(rest, "info/alternates/") || strings.HasPrefix(rest, "info/http-alternates/") {
			return Sealed
		}
		return Admin
	case "refs":
		// Replace refs make host git show one object in place of
		// another: a commit the developer reviews with git show or git
		// diff would not be the one they push.
		if rest == "replace" || strings.HasPrefix(rest, "replace/") {
			return Sealed
		}
		return Admin
	case "logs":
		return Admin
	}
	if sequencerDirs[top] {
		return Admin
	}
	if rest != "" {
		return Sealed
	}
	name := strings.TrimSuffix(top, ".lock")
	switch {
	case adminFiles[name], strings.HasPrefix(name, "MERGE_"):
		return Admin
	case strings.HasPrefix(top, "index.stash.") || strings.HasPrefix(top, "next-index-") && strings.HasSuffix(top, ".lock"):
		// Temporary indexes of git stash and of git commit <paths>.
		return Admin
	case top == "packed-refs.new":
		// git pack-refs (run by git gc) writes the new file beside the
		// lock before renaming it into place.
		return Admin
	}
	return Sealed
}

// locate finds the administrative area of path, or marks it foreign.
func (r Router) locate(path string) place {
	if path == ".git" || strings.HasPrefix(path, ".git/") {
		p := place{area: ".git", rel: strings.TrimPrefix(strings.TrimPrefix(path, ".git"), "/")}
		if strings.HasPrefix(p.rel, "modules/") {
			// The longest frozen module directory holding the path.
			for d := path; len(d) > len(".git/modules"); {
				if r.Repos.Modules[d] {
					return place{area: d, rel: strings.TrimPrefix(strings.TrimPrefix(path, d), "/")}
				}
				i := strings.LastIndexByte(d, '/')
				if i < 0 {
					break
				}
				d = d[:i]
			}
		}
		return p
	}
	if len(r.Repos.Bare) != 0 {
		for end := 0; end < len(path); end++ {
			if path[end] == '/' && r.Repos.Bare[path[:end]] {
				return place{area: path[:end], rel: path[end+1:]}
			}
		}
		if r.Repos.Bare[path] {
			return place{area: path}
		}
	}
	if !strings.Contains(path, "HEAD") && !hasDotGit(path) {
		return place{} // the common case: a plain work-tree path
	}
	// Walk the work-tree components: the first ".git" below the root is
	// either a frozen nested repository's or the sandbox's; an untracked
	// entry named HEAD is the sandbox's.
	for start := 0; start < len(path); {
		end := strings.IndexByte(path[start:], '/')
		if end < 0 {
			end = len(path)
		} else {
			end += start
		}
		comp := path[start:end]
		switch {
		case strings.EqualFold(comp, ".git"):
			dir := strings.TrimSuffix(path[:start], "/")
			if comp != ".git" || !r.Repos.Nested[dir] {
				return place{foreign: true}
			}
			return place{area: path[:end], rel: strings.TrimPrefix(path[end:], "/")}
		case comp == "HEAD":
			isLast := end == len(path)
			if r.Index == nil || !(r.Index.Tracked(path[:end], false) || r.Index.Tracked(path[:end], true)) {
				return place{foreign: true}
			}
			if isLast && r.Index.Tracked(path[:end], false) {
				return place{sealedHead: true}
			}
		}
		start = end + 1
	}
	return place{}
}

// Named is the set of paths that the host's git configuration names (a
// hooks directory, an excludes or attributes file, an include's target,
// a program a command setting starts), frozen at generation start. Each
// is sealed with everything below it, and so is each of its ancestors
// itself (not what else they hold), so that the sandbox can neither
// write such a file nor put a link or another directory in the place of
// a directory on its way. The zero value is empty.
type Named struct {
	sealed, ancestors map[string]bool
}

// NewNamed builds the set from view paths (relative to the view root,
// slash-separated); "" and "." are skipped.
func NewNamed(paths []string) Named {
	n := Named{sealed: map[string]bool{}, ancestors: map[string]bool{}}
	for _, p := range paths {
		if p == "" || p == "." {
			continue
		}
		n.sealed[p] = true
		for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
			n.ancestors[p[:i]] = true
		}
	}
	return n
}

// Len is the number of named paths.
func (n Named) Len() int { return len(n.sealed) }

// covers reports whether path is a named path, below one, or an ancestor
// of one.
func (n Named) covers(path string) bool {
	if len(n.sealed) == 0 {
		return false
	}
	if n.ancestors[path] || n.sealed[path] {
		return true
	}
	for i := strings.LastIndexByte(path, '/'); i > 0; i = strings.LastIndexByte(path[:i], '/') {
		if n.sealed[path[:i]] {
			return true
		}
	}
	return false
}

// Rule returns what the sandbox may do at path (relative to the view root).
// It is a pure function of the frozen layout and the path.
func (r Router) Rule(path string) Rule {
	if r.Named.covers(path) {
		return Sealed
	}
	p := r.locate(path)
	switch {
	case p.sealedHead:
		return Sealed
	case p.area != "":
		return adminRule(p.rel)
	}
	return Free
}

// Area returns the administrative directory holding path, "" for a
// work-tree path. Entries may move only within one area.
func (r Router) Area(path string) string { return r.locate(path).area }

// Shelters reports whether path is an allowlisted directory of an
// administrative area below which sealed paths lie (objects and
// objects/info, which hold the alternates files; refs, which holds
// refs/replace). Renaming it, or renaming a directory onto it, would
// carry a file the sandbox wrote to a sealed path or a sealed file out of
// its place, so the view refuses both.
func (r Router) Shelters(path string) bool {
	p := r.locate(path)
	return p.area != "" && (p.rel == "objects" || p.rel == "objects/info" || p.rel == "refs")
}

// HoldsRepo reports whether the work-tree directory dir is, or holds, a
// nested repository frozen at generation start. Renaming it would move a
// repository to a path the view no longer recognises as one.
func (r Router) HoldsRepo(dir string) bool {
	for _, set := range []map[string]bool{r.Repos.Nested, r.Repos.Bare} {
		for d := range set {
			if d == dir || dir == "" || strings.HasPrefix(d, dir+"/") {
				return true
			}
		}
	}
	return false
}

// hasDotGit reports whether path holds ".git" in any case.
func hasDotGit(path string) bool {
	for i := 0; i+4 <= len(path); i++ {
		if path[i] == '.' && path[i+1]|0x20 == 'g' && path[i+2]|0x20 == 'i' && path[i+3]|0x20 == 't' {
			return true
		}
	}
	return false
}
