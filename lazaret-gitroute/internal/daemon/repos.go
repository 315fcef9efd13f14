package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"golang.org/x/sys/unix"

	"lazaret.dev/lazaret-gitroute/internal/view"
)

// ErrRootHead means the workspace root holds an entry named HEAD. Git
// takes a directory holding HEAD, objects/ and refs/ for a bare
// repository when its .git is unusable; the sandbox can write .git/HEAD
// and create objects/, refs/ and a config at the root, so host git would
// then run what that config says.
var ErrRootHead = errors.New("git could take the workspace for a bare repository whose objects, refs and config the sandbox creates; rename or remove that HEAD")

// freezeRepos records the repositories present at generation start: every
// work-tree directory git would walk into that holds a ".git" (directory
// or gitfile) or a file named HEAD (a bare repository's layout),
// and every administrative directory below .git/modules. The view serves
// their administrative areas under the allowlist and any other ".git"
// from the isolated root.
func freezeRepos(tree view.Tree, cls view.Classifier) (view.Repos, error) {
	r := view.Repos{Nested: map[string]bool{}, Modules: map[string]bool{}, Bare: map[string]bool{}}
	if err := nested(tree, cls, "", r); err != nil {
		return view.Repos{}, err
	}
	if err := modules(tree, ".git/modules", r.Modules, 0); err != nil {
		return view.Repos{}, err
	}
	return r, nil
}

// nested walks dir as gitignore.Load does: not into the top-level .git,
// not into ignored directories (their host copies are never shown), and
// not below a nested repository.
func nested(tree view.Tree, cls view.Classifier, dir string, out view.Repos) error {
	ents, err := tree.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing workspace directory %q: %w", dir, err)
	}
	if dir == "" {
		for _, e := range ents {
			if e.Name == "HEAD" && !e.IsDir {
				return fmt.Errorf("the workspace root holds a file named HEAD: %w", ErrRootHead)
			}
		}
	} else {
		for _, e := range ents {
			if e.Name == ".git" {
				out.Nested[dir] = true
				return nil
			}
		}
		// A HEAD present at start, tracked or not, ignored or not: with
		// objects/ and refs/ beside it, which the sandbox could create,
		// git would take dir for a bare repository and read its config
		// and hooks.
		for _, e := range ents {
			if e.Name == "HEAD" && !e.IsDir {
				out.Bare[dir] = true
			}
		}
	}
	for _, e := range ents {
		if !e.IsDir || (dir == "" && e.Name == ".git") {
			continue
		}
		child := path.Join(dir, e.Name)
		if cls.Ignored(child, true) {
			continue
		}
		if err := nested(tree, cls, child, out); err != nil {
			return err
		}
	}
	return nil
}

// maxModuleDepth bounds the nesting of .git/modules directories walked.
const maxModuleDepth = 16

// modules records the submodule administrative directories below dir: a
// directory holding HEAD is one (its own modules/ may hold more); any
// other directory is a level of a submodule name that contains slashes.
func modules(tree view.Tree, dir string, out map[string]bool, depth int) error {
	if depth > maxModuleDepth {
		return fmt.Errorf("%q: submodule directories nest deeper than %d levels", dir, maxModuleDepth)
	}
	ents, err := tree.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return fmt.Errorf("listing %q: %w", dir, err)
	}
	for _, e := range ents {
		if !e.IsDir {
			continue
		}
		sub := path.Join(dir, e.Name)
		kids, err := tree.ReadDir(sub)
		if err != nil {
			return fmt.Errorf("listing %q: %w", sub, err)
		}
		admin := false
		for _, k := range kids {
			admin = admin || (k.Name == "HEAD" && !k.IsDir)
		}
		if admin {
			out[sub] = true
			if err := modules(tree, path.Join(sub, "modules"), out, depth+1); err != nil {
				return err
			}
			continue
		}
		if err := modules(tree, sub, out, depth+1); err != nil {
			return err
		}
	}
	return nil
}
