// Package gitignore classifies workspace paths the way git does: which paths
// its ignore rules exclude, and which it tracks in the index.
//
// What belongs here: the ignore-pattern syntax and matcher (per-line parsing,
// git's wildmatch with "**", anchoring, trailing "/", negation and backslash
// escapes), the precedence of ignore sources (nested .gitignore files, deepest
// first; then $GIT_DIR/info/exclude; then core.excludesFile or its default
// $XDG_CONFIG_HOME/git/ignore), the loading of one frozen snapshot of those
// sources from a Tree, the few git configuration keys classification needs,
// and the reader of the index's path list. What does not: opening files on
// the host (the caller's Tree does that confined to its root), and deciding
// where a path is served from (lazaret-gitroute's router does that).
//
// A Matcher is immutable once loaded: edits to ignore files after Load do not
// change its answers. That is the frozen classification of the workspace
// view (docs/WORKSPACE.md).
package gitignore
