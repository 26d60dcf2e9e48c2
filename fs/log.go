package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core/trace"
)

// logHandle is /log (package core/trace): a write is a ctl message that
// chooses the categories of the writer's lines (set, clear, only); a
// file opened for reading is a reader of the trace, whose reads block at
// every offset until lines are there, as Plan 9's /net/log, so that
// `cat /fabric/log` follows the trace until interrupted.
type logHandle struct {
	uid uint32
	r   *trace.Reader // nil: opened write-only
	q   *queueHandle  // reads r
}

var (
	_ = (fusefs.FileReader)((*logHandle)(nil))
	_ = (fusefs.FileWriter)((*logHandle)(nil))
	_ = (fusefs.FileReleaser)((*logHandle)(nil))
	_ = (fusefs.FilePoller)((*logHandle)(nil))
)

// openLog opens /log for the caller: a reader only if opened for reading,
// so `echo set cm > /fabric/log` costs the trace points nothing.
func openLog(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	h := &logHandle{uid: callerUID(ctx)}
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return h, nil
	}
	r, err := trace.Open(h.uid)
	if err != nil {
		return nil, err
	}
	h.r = r
	h.q = &queueHandle{nonblock: openFlagsNonblock(flags), pop: r.Read, stream: true, poller: newPoller(anyEvents(r.Ready), true)}
	return h, nil
}

// setNode gives the reader its node, which its poll notifies.
func (h *logHandle) setNode(node *fusefs.Inode) {
	if h.q != nil {
		h.q.node = node
	}
}

func (h *logHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.q == nil {
		return nil, syscall.EBADF
	}
	return h.q.Read(ctx, dest, off)
}

func (h *logHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if err := trace.Ctl(h.uid, string(data)); err != nil {
		return 0, errno(err)
	}
	return uint32(len(data)), 0
}

func (h *logHandle) Poll(ctx context.Context, in *fuse.PollIn, out *fuse.PollOut) syscall.Errno {
	if h.q == nil {
		out.Revents = pollOut
		return 0
	}
	return h.q.Poll(ctx, in, out)
}

func (h *logHandle) Release(ctx context.Context) syscall.Errno {
	if h.r != nil {
		h.r.Close()
		h.q.Release(ctx)
	}
	return 0
}
