package view

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Pruning. go-fuse keeps one node for every inode the kernel holds a
// lookup reference to, and the kernel keeps a FUSE inode while a dentry of
// it is cached. The view's entries are cached for long (watch.go), so an
// unused dentry is worth keeping: its next use costs no LOOKUP. But each
// one holds a node here (the node, its identity table entries and its
// parent's child entry; see docs/WORKSPACE.md, "Memory", for the measured
// cost), so the view holds at most about pruneBudget of them: when it
// holds more, Prune asks the kernel to drop the unused dentries of the
// oldest nodes, by view inode number (the order in which the view first
// saw their files), down to three quarters of the budget
// (FUSE_NOTIFY_PRUNE). The kernel evicts their inodes and sends FORGET,
// which releases the nodes. Whatever is in use stays (an open file, a
// process's working directory, a directory the gofer holds open, and the
// parents of all of these). The view's inode numbers do not change when a
// dropped entry is looked up again: FS.ino keeps them for the view's
// whole life.

const (
	// pruneEvery is the tick of the pruner: a view that served no request
	// for a whole tick is idle.
	pruneEvery = time.Second
	// pruneBurst nodes handed out since the last sweep start one even
	// while the view is busy, so that a long walk of a large tree holds no
	// more than about this many unused nodes (a few MiB) at a time.
	pruneBurst = 8192
	// pruneBatch node IDs go in one notification.
	pruneBatch = 512
	// settleIdle idle ticks in a row return memory after a busy spell: a
	// collection costs CPU the sandbox may want, so the short pauses
	// between an agent's commands do not call for one.
	settleIdle = 3
	// pruneBudget is how many nodes the view holds before Prune drops the
	// oldest unused ones: a workspace of tens of thousands of files stays
	// cached whole.
	pruneBudget = 32768
)

// ErrPruneUnsupported means the kernel's FUSE has no prune notification
// (FUSE protocol 7.45, Linux 6.18): there the kernel's dentry cache alone
// decides how long the view keeps its nodes.
var ErrPruneUnsupported = errors.New("the kernel's FUSE has no prune notification (protocol 7.45, Linux 6.18)")

// looked counts one node handed to the kernel and calls for a sweep at
// once after pruneBurst of them.
func (f *FS) looked() {
	if f.lookups.Add(1) == pruneBurst {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// step is what the pruner does at a tick.
type step int

const (
	wait step = iota
	sweepNodes
	settleMemory
)

// next decides a tick. busy says whether the view served a request since
// the previous tick, handed how many nodes it handed out since the last
// sweep, unsettled whether it served any since the last settle. A sweep
// waits for an idle tick, since the FORGETs it causes queue ahead of the
// sandbox's requests, unless a burst of lookups calls for it; memory is
// returned at the idle tick after that (once the FORGETs are served),
// after every busy spell, since serving a walk leaves garbage behind
// (listings, replies) whether or not a sweep dropped nodes.
func next(busy bool, handed uint64, unsettled bool) step {
	switch {
	case handed >= pruneBurst:
		return sweepNodes
	case busy:
		return wait
	case handed > 0:
		return sweepNodes
	case unsettled:
		return settleMemory
	}
	return wait
}

// Prune sweeps the view until ctx ends, at the first idle tick after
// nodes were handed out, or at once after pruneBurst of them, and calls
// settle once the view, after serving requests, has been idle for
// settleIdle ticks with nothing to sweep (the daemon returns the freed
// memory to the operating system there). The view must be mounted, its
// server built on Activity. Prune returns nil when ctx ends and an error
// at once when the kernel cannot prune (ErrPruneUnsupported) or refuses a
// notification; the view itself keeps working either way.
func (f *FS) Prune(ctx context.Context, settle func()) error {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	unsettled, idle := false, 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-f.kick:
		}
		busy := f.busy.Swap(false)
		if busy {
			unsettled, idle = true, 0
		} else {
			idle++
		}
		switch next(busy, f.lookups.Load(), unsettled && idle >= settleIdle) {
		case sweepNodes:
			f.lookups.Store(0)
			if _, err := f.sweep(); err != nil {
				return err
			}
		case settleMemory:
			if settle != nil {
				settle()
			}
			unsettled = false
		}
	}
}

// sweep counts the nodes below the root and, when there are more than the
// budget, names the oldest of them (lowest view inode numbers) to the
// kernel for pruning, down to three quarters of the budget, each directory
// after its children (so that a directory whose named children were all
// dropped is unused by the time it is named). It returns how many it
// named; the kernel drops the unused ones.
func (f *FS) sweep() (int, error) {
	root := f.root.EmbeddedInode()
	var nodes []*fs.Inode
	var below func(in *fs.Inode)
	below = func(in *fs.Inode) {
		for _, c := range in.Children() {
			below(c)
			nodes = append(nodes, c)
		}
	}
	below(root)
	if len(nodes) <= f.budget {
		return 0, nil
	}
	inos := make([]uint64, len(nodes))
	for i, in := range nodes {
		inos[i] = in.StableAttr().Ino
	}
	slices.Sort(inos)
	oldest := inos[len(nodes)-f.budget*3/4-1]
	named := nodes[:0]
	for _, in := range nodes {
		if in.StableAttr().Ino <= oldest {
			named = append(named, in)
		}
	}
	for i := 0; i < len(named); i += pruneBatch {
		switch e := root.NotifyPrune(named[i:min(i+pruneBatch, len(named))]); e {
		case 0:
		case syscall.ENOSYS:
			return i, ErrPruneUnsupported
		default:
			return i, fmt.Errorf("asking the kernel to prune %d view nodes: %w", len(named), e)
		}
	}
	return len(named), nil
}

// Activity returns raw (the view's node file system) with the requests
// that show the sandbox at work marked for Prune: lookups, attributes,
// opens, reads, writes and listings.
func (f *FS) Activity(raw fuse.RawFileSystem) fuse.RawFileSystem {
	return &active{RawFileSystem: raw, f: f}
}

// active marks the view busy on each request it passes on.
type active struct {
	fuse.RawFileSystem
	f *FS
}

func (a *active) mark() {
	if !a.f.busy.Load() {
		a.f.busy.Store(true)
	}
}

func (a *active) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	a.mark()
	return a.RawFileSystem.Lookup(cancel, h, name, out)
}

func (a *active) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	a.mark()
	return a.RawFileSystem.GetAttr(cancel, in, out)
}

func (a *active) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	a.mark()
	return a.RawFileSystem.Open(cancel, in, out)
}

func (a *active) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	a.mark()
	return a.RawFileSystem.Create(cancel, in, name, out)
}

func (a *active) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	a.mark()
	return a.RawFileSystem.Read(cancel, in, buf)
}

func (a *active) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	a.mark()
	return a.RawFileSystem.Write(cancel, in, data)
}

func (a *active) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	a.mark()
	return a.RawFileSystem.ReadDir(cancel, in, out)
}

func (a *active) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	a.mark()
	return a.RawFileSystem.ReadDirPlus(cancel, in, out)
}
