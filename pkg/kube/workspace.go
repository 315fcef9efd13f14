package kube

// CloneScript makes the pod's workspace a clone of the developer's remote
// at the rendered commit. It is constant: the URL, commit and branch reach
// it as environment variables, never spliced into the text, so no remote
// name or branch can become shell syntax. It runs before the agent on
// every start of the pod:
//
//   - A workspace that already holds .git is kept (the claim outlives the
//     pod, and the agent's work with it).
//   - Otherwise the repository is fetched into a bare directory in the
//     claim (.lazaret-clone.git, removed first), the commit is checked out
//     into the tree, and only then is the directory moved to .git, so a
//     start that fails half way leaves no repository that a later start
//     would keep.
//   - A commit the remote does not have fails the container, naming the
//     commit and the remote (the termination message shows it).
//
// Only committed files exist in a clone: git-ignored files of the
// developer's tree (.env, build output) are absent by construction, and so
// are uncommitted changes.
const CloneScript = `set -eu
ws=$LAZARET_WORKSPACE
commit=$LAZARET_GIT_COMMIT
if [ -e "$ws/.git" ]; then
    echo "lazaret: $ws already holds a repository; keeping it" >&2
    exit 0
fi
tmp=$ws/.lazaret-clone.git
rm -rf "$tmp"
git init -q --bare "$tmp"
git --git-dir="$tmp" remote add origin "$LAZARET_GIT_URL"
if ! git --git-dir="$tmp" fetch -q origin; then
    echo "lazaret: cannot fetch $LAZARET_GIT_URL" >&2
    exit 1
fi
if ! git --git-dir="$tmp" cat-file -e "$commit^{commit}" 2>/dev/null; then
    git --git-dir="$tmp" fetch -q origin "$commit" 2>/dev/null || true
fi
if ! git --git-dir="$tmp" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "lazaret: commit $commit is not on $LAZARET_GIT_URL; push it, then restart the pod" >&2
    exit 1
fi
git --git-dir="$tmp" config core.bare false
if [ -n "$LAZARET_GIT_BRANCH" ]; then
    git --git-dir="$tmp" --work-tree="$ws" checkout -q -f -B "$LAZARET_GIT_BRANCH" "$commit"
else
    git --git-dir="$tmp" --work-tree="$ws" -c advice.detachedHead=false checkout -q -f --detach "$commit"
fi
mv "$tmp" "$ws/.git"
echo "lazaret: $ws is $LAZARET_GIT_URL at $commit" >&2
`
