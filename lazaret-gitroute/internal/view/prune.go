package view

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
)

// Pruning. go-fuse keeps one node for every inode the kernel holds a
// lookup reference to, and the kernel keeps a FUSE inode while a dentry of
// it is cached. A view entry is valid for one second (Options), but an
// unused dentry stays in the dentry cache after that, expired, until
// memory pressure reclaims it: once the sandbox has walked the workspace,
// every path it touched is held by the kernel (a dentry and an inode) and
// here (a node, its identity table entries and its parent's child entry,
// about 500 bytes), for nothing, since an expired entry costs a LOOKUP on
// its next use just as a missing one does. Prune asks the kernel to drop
// the dentries nobody uses (FUSE_NOTIFY_PRUNE): the kernel evicts their
// inodes and sends FORGET, which releases the nodes. Whatever is in use
// stays (an open file, a process's working directory, a directory the
// gofer holds open, and the parents of all of these). The view's inode
// numbers do not change when a dropped entry is looked up again: FS.ino
// keeps them for the view's whole life.

const (
	// pruneEvery is how often a view that handed out nodes since the
	// last sweep is swept.
	pruneEvery = 2 * time.Second
	// pruneBurst nodes handed out since the last sweep start one at once,
	// so that a walk of a large tree holds no more than about this many
	// unused nodes at a time.
	pruneBurst = 4096
	// pruneBatch node IDs go in one notification.
	pruneBatch = 512
)

// ErrPruneUnsupported means the kernel's FUSE has no prune notification
// (FUSE protocol 7.45, Linux 6.18): there the kernel's dentry cache alone
// decides how long the view keeps its nodes.
var ErrPruneUnsupported = errors.New("the kernel's FUSE has no prune notification (protocol 7.45, Linux 6.18)")

// looked counts one node handed to the kernel and starts a sweep early
// after pruneBurst of them.
func (f *FS) looked() {
	if f.lookups.Add(1) == pruneBurst {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// Prune sweeps the view until ctx ends, every pruneEvery or after
// pruneBurst lookups, whenever nodes were handed out since the last sweep.
// When it finds the view idle after sweeps that named nodes, it calls
// settle once (the daemon returns the freed memory to the operating system
// there). The view must be mounted. Prune returns nil when ctx ends and an
// error at once when the kernel cannot prune (ErrPruneUnsupported) or
// refuses a notification; the view itself keeps working either way.
func (f *FS) Prune(ctx context.Context, settle func()) error {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	unsettled := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-f.kick:
		}
		if f.lookups.Swap(0) == 0 {
			if unsettled && settle != nil {
				settle()
			}
			unsettled = false
			continue
		}
		n, err := f.sweep()
		if err != nil {
			return err
		}
		unsettled = unsettled || n > 0
	}
}

// sweep names every node but the root to the kernel for pruning, each
// directory after its children (so that a directory whose children were
// all dropped is unused by the time it is named), and returns how many it
// named. The kernel drops the unused ones.
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
	for i := 0; i < len(nodes); i += pruneBatch {
		switch e := root.NotifyPrune(nodes[i:min(i+pruneBatch, len(nodes))]); e {
		case 0:
		case syscall.ENOSYS:
			return i, ErrPruneUnsupported
		default:
			return i, fmt.Errorf("asking the kernel to prune %d view nodes: %w", len(nodes), e)
		}
	}
	return len(nodes), nil
}
