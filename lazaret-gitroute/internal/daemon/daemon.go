package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"lazaret.dev/lazaret-gitroute/internal/view"
	"lazaret.dev/pkg/gitignore"
	"lazaret.dev/pkg/gitroute"
)

// Errors of the daemon; test with errors.Is.
var (
	// ErrOverlap means the view's roots or mountpoint nest inside one
	// another, which would let the view reach itself or the isolated root.
	ErrOverlap = errors.New("workspace, isolated root and mountpoint must not contain one another")
	// ErrNoGitDir means the workspace has no .git directory.
	ErrNoGitDir = errors.New("workspace has no .git directory (a linked worktree or submodule, whose .git is a file, is not supported)")
	// ErrCoordinatorGone means the control channel closed without Release.
	ErrCoordinatorGone = errors.New("control channel closed without Release")
	// ErrUnmountedExternally means the view stopped being served without a
	// Release (someone unmounted it).
	ErrUnmountedExternally = errors.New("view was unmounted without Release")
)

// Config is one daemon run.
type Config struct {
	HostRoot, IsolatedRoot, Mountpoint string
	Method                             MountMethod
	// Control is the inherited control socket (fd 3); Run owns it.
	Control *os.File
	Log     *slog.Logger
	// Home and XDGConfigHome locate the user's git configuration.
	Home, XDGConfigHome string
	// KeepIsolated names the keep file (package isolation): paths routed
	// to the isolated root whatever the classification says. "" keeps
	// none.
	KeepIsolated string
	// IsolationReport names the report the daemon creates before Ready:
	// the host entries present at start that route to the isolated root.
	// "" writes none.
	IsolationReport string
	// Settle, when set, returns memory the daemon no longer uses to the
	// operating system (main passes helpermain.Settle). Run calls it once
	// the view is ready (the classification's working data is garbage
	// then) and one idle second after each sweep of the view's nodes.
	Settle func()
}

// Run serves the view until Release, the coordinator's loss, or ctx's end.
func Run(ctx context.Context, cfg Config) error {
	conn, err := gitroute.NewConn(cfg.Control)
	if err != nil {
		return err
	}
	defer conn.Close()
	fail := func(stage gitroute.FailureStage, err error) error {
		if serr := conn.SendReport(&gitroute.Failed{Stage: stage, Detail: err.Error()}); serr != nil {
			cfg.Log.Warn("reporting failure", "err", serr)
		}
		return err
	}
	// Modes arrive from the kernel already masked by the caller's umask.
	unix.Umask(0)

	hostFd, hostID, err := openRoot(cfg.HostRoot)
	if err != nil {
		return fail(gitroute.StageSetup, fmt.Errorf("host root: %w", err))
	}
	defer unix.Close(hostFd)
	isoFd, isoID, err := openRoot(cfg.IsolatedRoot)
	if err != nil {
		return fail(gitroute.StageSetup, fmt.Errorf("isolated root: %w", err))
	}
	defer unix.Close(isoFd)
	if err := checkOverlap(hostFd, isoFd, cfg.Mountpoint); err != nil {
		return fail(gitroute.StageSetup, err)
	}

	keep, err := readKeep(cfg.KeepIsolated)
	if err != nil {
		return fail(gitroute.StageClassify, err)
	}
	walk := &isolationWalk{keep: keep}
	cls, named, err := classify(ctx, hostFd, cfg, walk)
	if err != nil {
		return fail(gitroute.StageClassify, err)
	}
	if err := walk.writeReport(cfg.IsolationReport); err != nil {
		return fail(gitroute.StageClassify, err)
	}
	cfg.Log.Info("isolation reported", "report", cfg.IsolationReport, "keep_file", cfg.KeepIsolated,
		"kept_paths", keep.Len(), "isolated_host_entries", len(walk.found), "kept_only", walk.kept())
	cfg.Log.Info("classification frozen", "host_root", cfg.HostRoot, "ignore_files", cls.Matcher.Files(), "tracked_paths", cls.Index.Len())
	router := view.Router{C: walk.classifier(cls), Index: cls.Index, Named: view.NewNamed(named)}
	router.Repos, err = freezeRepos(view.NewTree(hostFd), router.C)
	if err != nil {
		return fail(gitroute.StageClassify, fmt.Errorf("workspace %q: %w", cfg.HostRoot, err))
	}
	cfg.Log.Info("repositories frozen", "nested", len(router.Repos.Nested), "modules", len(router.Repos.Modules), "bare", len(router.Repos.Bare))
	if len(named) > 0 {
		cfg.Log.Info("paths git's configuration names sealed", "paths", fmt.Sprintf("%q", named))
	}

	mnt, err := mountView(cfg.Mountpoint, cfg.Method)
	if err != nil {
		return fail(gitroute.StageMount, err)
	}
	cfg.Log.Info("view mounted", "mountpoint", cfg.Mountpoint, "auto_unmount", mnt.watch != nil)
	v := view.New(hostFd, isoFd, router, cfg.Log)
	mo := fuse.MountOptions{
		FsName:   fsName,
		Name:     subtype,
		MaxWrite: maxRead,
		Logger:   nil,
		// The view clears set-ID bits itself, so the kernel reads no
		// attributes before a chown.
		ExtraCapabilities: view.KillPrivCapability,
	}
	server, err := fuse.NewServer(v.Activity(gofs.NewNodeFS(v.Root(), view.Options(mo))), "/dev/fd/"+strconv.Itoa(mnt.fd), &mo)
	if err != nil {
		_ = gitroute.Unmount(cfg.Mountpoint, true)
		return fail(gitroute.StageMount, fmt.Errorf("starting the FUSE server: %w", err))
	}
	go server.Serve()
	served := make(chan struct{})
	go func() {
		server.Wait()
		close(served)
	}()
	if err := server.WaitMount(); err != nil {
		_ = gitroute.Unmount(cfg.Mountpoint, true)
		return fail(gitroute.StageMount, fmt.Errorf("initialising the FUSE connection: %w", err))
	}
	mid, err := gitroute.MountAt(cfg.Mountpoint)
	if err != nil {
		_ = gitroute.Unmount(cfg.Mountpoint, true)
		return fail(gitroute.StageMount, err)
	}
	if err := conn.SendReport(&gitroute.Ready{
		Version: gitroute.Version, Mount: mid, HostRoot: hostID, IsolatedRoot: isoID,
		IgnoreFiles: uint32(cls.Matcher.Files()), TrackedPaths: uint32(cls.Index.Len()),
	}); err != nil {
		_ = gitroute.Unmount(cfg.Mountpoint, true)
		return err
	}
	cfg.Log.Info("view ready", "mountpoint", cfg.Mountpoint, "mount_id", mid.MountID)
	settle := cfg.Settle
	if settle == nil {
		settle = func() {}
	}
	settle()
	pruneCtx, stopPruning := context.WithCancel(context.Background())
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		if err := v.Prune(pruneCtx, settle); err != nil {
			cfg.Log.Warn("the view's unused nodes are left to the kernel's dentry cache", "err", err)
		}
	}()
	// The watcher tells the kernel about host changes (view.Watch); until
	// its first walk has placed a directory's watch, that directory is
	// served with one-second timeouts, so the start does not wait for it.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if err := v.Watch(pruneCtx, make(chan struct{})); err != nil {
			cfg.Log.Warn("the host tree is not watched: entries and attributes are cached for one second", "err", err)
		}
	}()
	// Pruning and the watcher write to the FUSE connection: they end
	// before the view is unmounted.
	stopPrune := func() {
		stopPruning()
		<-pruned
		<-watched
	}

	cmds := make(chan error, 1)
	go func() {
		for {
			c, err := conn.RecvCommand()
			if err != nil {
				if errors.Is(err, gitroute.ErrMalformed) {
					cfg.Log.Warn("rejected control packet", "err", err)
					continue
				}
				if errors.Is(err, io.EOF) {
					err = ErrCoordinatorGone
				}
				cmds <- err
				return
			}
			if _, ok := c.(*gitroute.Release); ok {
				cmds <- nil
				return
			}
		}
	}()

	var cause error
	select {
	case err := <-cmds:
		cause = err
	case <-ctx.Done():
		cause = ctx.Err()
	case <-served:
		stopPrune()
		err := fail(gitroute.StageServe, ErrUnmountedExternally)
		mnt.close()
		return err
	}
	stopPrune()
	cfg.Log.Info("unmounting view", "mountpoint", cfg.Mountpoint, "cause", fmt.Sprint(cause))
	uerr := unmount(cfg.Mountpoint, served)
	mnt.close()
	if cause == nil {
		if uerr != nil {
			return fail(gitroute.StageUnmount, uerr)
		}
		return conn.SendReport(&gitroute.Released{})
	}
	return errors.Join(cause, uerr)
}

// unmount detaches the view and waits for the server to stop; a busy mount
// is detached lazily.
func unmount(mountpoint string, served <-chan struct{}) error {
	err := gitroute.Unmount(mountpoint, false)
	if err != nil {
		if lerr := gitroute.Unmount(mountpoint, true); lerr != nil {
			return errors.Join(err, lerr)
		}
	}
	select {
	case <-served:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("unmounting %q: the FUSE server did not stop", mountpoint)
	}
}

func (m *fuseMount) close() {
	if m.watch != nil {
		m.watch.Close()
	}
}

// openRoot retains dir and returns its identity.
func openRoot(dir string) (int, gitroute.FileIdentity, error) {
	fd, err := view.OpenRoot(dir)
	if err != nil {
		return -1, gitroute.FileIdentity{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, gitroute.FileIdentity{}, &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
	return fd, gitroute.FileIdentity{Device: st.Dev, Inode: st.Ino}, nil
}

// checkOverlap refuses roots and a mountpoint that contain one another,
// comparing the paths the kernel resolved for the retained descriptors.
func checkOverlap(hostFd, isoFd int, mountpoint string) error {
	host, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(hostFd))
	if err != nil {
		return fmt.Errorf("resolving the host root: %w", err)
	}
	iso, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(isoFd))
	if err != nil {
		return fmt.Errorf("resolving the isolated root: %w", err)
	}
	mp, err := filepath.EvalSymlinks(mountpoint)
	if err != nil {
		return fmt.Errorf("resolving the mountpoint: %w", err)
	}
	within := func(a, b string) bool { return a == b || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/") }
	pairs := [][2]string{{host, iso}, {iso, host}, {mp, host}, {host, mp}, {mp, iso}, {iso, mp}}
	for _, p := range pairs {
		if within(p[0], p[1]) {
			return fmt.Errorf("%q is within %q: %w", p[0], p[1], ErrOverlap)
		}
	}
	return nil
}

// classify freezes git's view of the workspace: configuration, index,
// info/exclude, global excludes and every .gitignore git would read. It
// also returns the workspace paths git's configuration names
// (gitignore.Config.Named), which the view seals.
func classify(ctx context.Context, hostFd int, cfg Config, walk *isolationWalk) (*gitignore.Classifier, []string, error) {
	tree := view.NewTree(hostFd)
	if _, err := tree.ReadDir(".git"); err != nil {
		return nil, nil, fmt.Errorf("%q: %w", filepath.Join(cfg.HostRoot, ".git"), ErrNoGitDir)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, nil, fmt.Errorf("finding git: %w", err)
	}
	gc, err := gitignore.ReadConfig(ctx, git, filepath.Join(cfg.HostRoot, ".git"), cfg.HostRoot,
		gitignore.Env{Home: cfg.Home, XDGConfigHome: cfg.XDGConfigHome}, []string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		return nil, nil, err
	}
	hashSize, err := gitignore.HashSize(gc.ObjectFormat)
	if err != nil {
		return nil, nil, err
	}
	idx := &gitignore.Index{}
	data, err := tree.ReadFile(".git/index", 1<<31)
	switch {
	case err == nil:
		if idx, err = gitignore.ParseIndex(data, hashSize); err != nil {
			return nil, nil, fmt.Errorf("reading %q: %w", filepath.Join(cfg.HostRoot, ".git/index"), err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, nil, err
	}
	info, err := tree.ReadFile(".git/info/exclude", gitignore.MaxIgnoreFileSize)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	var global []byte
	if gc.ExcludesFile != "" {
		global, err = readGlobal(gc.ExcludesFile)
		if err != nil {
			return nil, nil, err
		}
	}
	m, err := gitignore.LoadVisit(tree, gitignore.Sources{InfoExclude: info, GlobalExcludes: global, GlobalName: gc.ExcludesFile}, walk.visit(idx))
	if err != nil {
		return nil, nil, err
	}
	return &gitignore.Classifier{Matcher: m, Index: idx}, gc.Named, nil
}

// readGlobal reads the user's global excludes file (the user's own file,
// outside the workspace; a symbolic link to it is followed, as git does).
func readGlobal(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading global excludes: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, gitignore.MaxIgnoreFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading global excludes %q: %w", path, err)
	}
	if len(data) > gitignore.MaxIgnoreFileSize {
		return nil, fmt.Errorf("global excludes %q: %w", path, gitignore.ErrIgnoreFileTooLarge)
	}
	return data, nil
}
