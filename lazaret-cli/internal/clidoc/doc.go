// Package clidoc writes the shell completion scripts (bash, zsh, fish) and
// the man pages of a urfave/cli application from its command tree, so they
// name exactly the commands and flags the binary has.
//
// Bash and zsh scripts are static: they walk the typed words against the
// tree written into them and never run the command line being completed
// (urfave/cli's own scripts eval it with --generate-bash-completion). The
// fish script is urfave/cli's ToFishCompletion, which is static too. Man
// pages are roff written here: urfave/cli's ToMan goes through a Markdown
// parser that the build leaves out (the urfave_cli_no_docs tag) because
// its tables cost every process start.
//
// Files:
//   - tree.go: the visible commands and flags, walked once.
//   - completion.go: Bash, Zsh and Fish.
//   - man.go: Pages, one roff page for the program and one per top-level
//     command.
//
// What a command does belongs to its package; only how it is shown is
// here.
package clidoc
