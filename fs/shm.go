package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/core/shm"
)

// Shared-memory files (ep/N/tx, ep/N/rx, cq/N/data, mr/N/data) give the
// application the daemon's own pages. With shm.MapPassthrough the file is
// served by FUSE passthrough to the daemon's memfd: the kernel does reads,
// writes and mmap on the memfd itself and FUSE's page cache is never
// involved. With shm.MapSymlink the file is a symbolic link to the memfd
// as /proc/PID/fd/N of a process the caller may open it from (shm.Allocator.Link),
// so the target depends on who reads the link.

// shmHandle is an open passthrough file.
type shmHandle struct {
	ref
	reg *ring.Region
}

var (
	_ = (fusefs.FilePassthroughFder)((*shmHandle)(nil))
	_ = (fusefs.FileReader)((*shmHandle)(nil))
	_ = (fusefs.FileWriter)((*shmHandle)(nil))
)

// PassthroughFd hands the kernel the memfd.
func (h *shmHandle) PassthroughFd() (int, bool) { return int(h.reg.File.Fd()), true }

// Read and Write serve the rare request the kernel does not pass through
// (none once passthrough is set up); they act on the memfd directly.
func (h *shmHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.reg.File.ReadAt(dest, off)
	if n == 0 && err != nil {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *shmHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if off < 0 || off+int64(len(data)) > int64(len(h.reg.Mem)) {
		return 0, syscall.EFBIG
	}
	n, err := h.reg.File.WriteAt(data, off)
	if err != nil {
		return uint32(n), syscall.EIO
	}
	return uint32(n), 0
}

// shmEntry makes the entry of a shared-memory file of o whose memory region
// returns (creating it if that is how the object works).
func (t *tree) shmEntry(o *core.Object, name string, slot int, region func() (*ring.Region, error)) entry {
	mem := t.fab.Shm
	if mem.Mode == shm.MapSymlink {
		m := meta{mode: syscall.S_IFLNK | 0o777, uid: o.Owner}
		return entry{name: name, ino: objIno(o, slot), meta: m, node: func() fusefs.InodeEmbedder {
			return &link{meta: m, resolve: func(ctx context.Context) (string, syscall.Errno) {
				r, err := region()
				if err == nil {
					uid, gid := caller(ctx)
					var target string
					if target, err = mem.Link(r, uid, gid); err == nil {
						return target, 0
					}
				}
				return "", fail(o, "readlink "+name, err)
			}}
		}}
	}
	m := meta{mode: syscall.S_IFREG | 0o600, uid: o.Owner}
	return entry{name: name, ino: objIno(o, slot), meta: m, node: func() fusefs.InodeEmbedder {
		return &file{meta: m, obj: o, name: name,
			size: func() uint64 {
				if r, err := region(); err == nil {
					return uint64(len(r.Mem))
				}
				return 0
			},
			open: func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
				r, err := region()
				if err != nil {
					return nil, err
				}
				return &shmHandle{reg: r}, nil
			}}
	}}
}
