package fs

import (
	"context"
	"errors"
	"os"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
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

// shmHandle is an open passthrough file. It has its own descriptor of the
// memfd (ring.Region.Dup), so that the region's Close (rmdir) does not
// change what it uses under it; it closes it at release.
type shmHandle struct {
	ref
	file *os.File
	size int64
}

var (
	_ = (fusefs.FilePassthroughFder)((*shmHandle)(nil))
	_ = (fusefs.FileReader)((*shmHandle)(nil))
	_ = (fusefs.FileWriter)((*shmHandle)(nil))
	_ = (fusefs.FileReleaser)((*shmHandle)(nil))
	_ = (fusefs.FileGetattrer)((*shmHandle)(nil))
)

// openShm makes the handle of an open shared-memory file of region r; it
// fails with ENOENT once the region is closed.
func openShm(o *core.Object, r *ring.Region) (*shmHandle, error) {
	f, err := r.Dup()
	if errors.Is(err, os.ErrClosed) {
		return nil, core.Errorf(fi.ENOENT, "%s is gone", o)
	}
	if err != nil {
		return nil, core.Errorf(fi.EMFILE, "%s: %v", o, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, core.Errorf(fi.EIO, "%s: %v", o, err)
	}
	return &shmHandle{file: f, size: st.Size()}, nil
}

// PassthroughFd hands the kernel the memfd.
func (h *shmHandle) PassthroughFd() (int, bool) { return int(h.file.Fd()), true }

// Getattr gives the size of the memory the file was opened on, also after
// its object is gone.
func (h *shmHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	out.Size = uint64(h.size)
	return 0
}

// Release closes the handle's descriptor and drops its reference.
func (h *shmHandle) Release(ctx context.Context) syscall.Errno {
	h.file.Close()
	return h.ref.Release(ctx)
}

// Read and Write serve the rare request the kernel does not pass through
// (none once passthrough is set up); they act on the memfd directly, and
// fail with ENOENT once the object is gone.
func (h *shmHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if errno := h.live(); errno != 0 {
		return nil, errno
	}
	n, err := h.file.ReadAt(dest, off)
	if n == 0 && err != nil {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *shmHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := h.live(); errno != 0 {
		return 0, errno
	}
	if off < 0 || off+int64(len(data)) > h.size {
		return 0, syscall.EFBIG
	}
	n, err := h.file.WriteAt(data, off)
	if err != nil {
		return uint32(n), syscall.EIO
	}
	return uint32(n), 0
}

// ringEntry is shmEntry for an endpoint's tx or rx ring, which the
// endpoint makes on the file's first open (core's EP.Ring): the size a
// stat shows comes from size and makes nothing. (In the symlink mode,
// reading the link makes the ring, as its target is the ring's memfd.)
func (t *tree) ringEntry(o *core.Object, name string, slot int, region func() (*ring.Region, error), size func() (uint64, error)) entry {
	e := t.shmEntry(o, name, slot, region)
	if t.fab.Shm.Mode == shm.MapSymlink {
		return e
	}
	node := e.node
	e.node = func() fusefs.InodeEmbedder {
		f := node().(*file)
		f.size = func() uint64 {
			n, err := size()
			if err != nil {
				return 0
			}
			return n
		}
		return f
	}
	return e
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
					return uint64(r.Len())
				}
				return 0
			},
			open: func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
				r, err := region()
				if err != nil {
					return nil, err
				}
				return openShm(o, r)
			}}
	}}
}
