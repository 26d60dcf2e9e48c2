package fs

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// ref is the reference an open file holds on its object, the file's name
// in the object's directory ("ctl", "attr/tx_size") and its node.
type ref struct {
	obj  *core.Object
	name string
	node *fusefs.Inode
}

func (r *ref) setRef(o *core.Object, name string, node *fusefs.Inode) {
	r.obj, r.name, r.node = o, name, node
}

// fail is fs.fail for the file's object.
func (r *ref) fail(op string, err error) syscall.Errno { return fail(r.obj, op, err) }

// live is ENOENT once the file's object is gone (rmdir): an object's open
// files fail from then on.
func (r *ref) live() syscall.Errno {
	if r.obj != nil && !r.obj.Alive() {
		return syscall.ENOENT
	}
	return 0
}

func (r *ref) Release(ctx context.Context) syscall.Errno {
	if r.obj != nil {
		r.obj.Release()
		r.obj = nil
	}
	return 0
}

// textHandle serves text rendered by every read at offset 0 (or the first
// read, at any offset), so that a program keeping the file open reads the
// current text with pread(fd, buf, n, 0) (a counter's value), and a read
// at a later offset continues that text; a write, if allowed, goes to
// write as one unit (a command, an attribute value). A failed write's sentence begins with the file's name and what
// was written ("attr/tx_size 0: bad size..."), or, for a ctl file, the
// command alone, echoed up to maxEcho bytes; attr/auth_key's value, a
// secret, is not echoed.
type textHandle struct {
	ref
	render func() string // nil: text is fixed
	write  func(ctx context.Context, data []byte) error
	ctl    bool // writes are commands

	mu   sync.Mutex
	text []byte // nil until the first read, with render
}

var (
	_ = (fusefs.FileReader)((*textHandle)(nil))
	_ = (fusefs.FileWriter)((*textHandle)(nil))
	_ = (fusefs.FileReleaser)((*textHandle)(nil))
)

func (h *textHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// A removed object's file keeps the text it had.
	if h.render != nil && (off == 0 || h.text == nil) && h.live() == 0 {
		h.text = []byte(h.render())
	}
	if off >= int64(len(h.text)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.text[off:min(int64(len(h.text)), off+int64(len(dest)))]), 0
}

func (h *textHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.write == nil {
		return 0, syscall.EBADF
	}
	if errno := h.live(); errno != 0 {
		return 0, errno
	}
	if err := h.write(ctx, data); err != nil {
		op := core.Abbrev(strings.TrimSpace(string(data)), maxEcho)
		switch {
		case h.name == "attr/auth_key":
			op = h.name // a key is a secret: never echoed into err or the trace
		case !h.ctl:
			op = h.name + " " + op
		}
		return 0, h.fail(op, err)
	}
	return uint32(len(data)), 0
}

// maxEcho bounds the part of a failed write its err sentence echoes; the
// whole sentence is bounded by core.MaxErrLen.
const maxEcho = 256

// rendered opens a file whose text render makes at each read at offset 0;
// set, if not nil, takes writes.
func rendered(render func() string, set func(ctx context.Context, data []byte) error) func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	return func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
		return &textHandle{render: render, write: set}, nil
	}
}

// line terminates s with a newline unless empty.
func line(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// queueHandle reads text lines from a queue: CQ and EQ events, a passive
// endpoint's accepted connections. A read at offset 0 blocks until there is
// something (unless the file is O_NONBLOCK); a read at a later offset
// returns what is pending or end of file. Lines that do not fit the read
// wait in rest for the next one, so nothing is lost.
type queueHandle struct {
	ref
	nonblock bool
	pop      func(ctx context.Context, max int, block bool) ([]string, error)
	poller   *poller
	// peek: pop does not consume (cq/N/wait), so only a read at offset 0
	// asks it; later offsets are end of file.
	peek bool
	// stream: a read blocks at every offset, not only at 0 (/log).
	stream bool

	mu   sync.Mutex // held by a read, also while it blocks
	rest []byte
	// resting is len(rest) > 0, for Poll, which must not wait for mu.
	resting atomic.Bool
}

var (
	_ = (fusefs.FileReader)((*queueHandle)(nil))
	_ = (fusefs.FileReleaser)((*queueHandle)(nil))
	_ = (fusefs.FilePoller)((*queueHandle)(nil))
)

func (h *queueHandle) Poll(ctx context.Context, in *fuse.PollIn, out *fuse.PollOut) syscall.Errno {
	h.poller.poll(h.node, in, out, h.resting.Load(), h.live() != 0)
	return 0
}

func (h *queueHandle) Release(ctx context.Context) syscall.Errno {
	h.poller.release()
	return h.ref.Release(ctx)
}

// lineBudget estimates how many lines fit a read of n bytes.
const lineBudget = 160

func (h *queueHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if errno := h.live(); errno != 0 {
		return nil, errno
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rest) == 0 {
		if h.peek && off != 0 {
			return fuse.ReadResultData(nil), 0
		}
		block := (off == 0 || h.stream) && !h.nonblock
		lines, err := h.pop(ctx, max(1, len(dest)/lineBudget), block)
		if err != nil {
			if core.Code(err) == fi.EAGAIN {
				if off != 0 && !h.stream {
					return fuse.ReadResultData(nil), 0
				}
				return nil, errno(err) // nothing yet is no failure
			}
			return nil, h.fail("read "+h.name, err)
		}
		for _, l := range lines {
			h.rest = append(h.rest, l...)
			h.rest = append(h.rest, '\n')
		}
	}
	n := copy(dest, h.rest)
	h.rest = h.rest[n:]
	h.resting.Store(len(h.rest) > 0)
	return fuse.ReadResultData(dest[:n]), 0
}

// queue opens a queue file: pop reads it, ready answers poll.
func queue(pop func(ctx context.Context, max int, block bool) ([]string, error), ready func() (bool, <-chan struct{})) func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	return func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
		return &queueHandle{nonblock: openFlagsNonblock(flags), pop: pop, poller: newPoller(anyEvents(ready), false)}, nil
	}
}

// watch is queue for a pop that does not consume.
func watch(pop func(ctx context.Context, max int, block bool) ([]string, error), ready func() (bool, <-chan struct{})) func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
	return func(ctx context.Context, flags uint32) (fusefs.FileHandle, error) {
		return &queueHandle{nonblock: openFlagsNonblock(flags), pop: pop, peek: true, poller: newPoller(anyEvents(ready), false)}, nil
	}
}

// anyEvents is the readiness of a file whose answer does not depend on
// the events polled for.
func anyEvents(ready func() (bool, <-chan struct{})) readiness {
	return func(uint32) (bool, <-chan struct{}) { return ready() }
}

// dataHandle is ep/N/data (one write sends one message; reads receive)
// and srx/N/data (reads receive).
type dataHandle struct {
	ref
	msgs interface {
		ReadData(ctx context.Context, p []byte, off int64) (int, error)
		DataReady(post bool) (bool, <-chan struct{})
	}
	poller *poller
}

// newDataHandle opens a data file; writable: ep/N/data. Only a poll for
// reading alone posts a receive (DataReady): a poll that also asks for
// POLLOUT, such as the one with which a Go program's runtime registers
// every file it opens, must not take a message from the endpoint's other
// receives (and on ep/N/data it returns at once for POLLOUT anyway).
func newDataHandle(msgs interface {
	ReadData(ctx context.Context, p []byte, off int64) (int, error)
	DataReady(post bool) (bool, <-chan struct{})
}, writable bool) *dataHandle {
	ready := func(events uint32) (bool, <-chan struct{}) { return msgs.DataReady(events&pollOut == 0) }
	return &dataHandle{msgs: msgs, poller: newPoller(ready, writable)}
}

// dataWriter is the endpoint's side of a write to data.
type dataWriter interface {
	WriteData(ctx context.Context, b []byte) error
}

var (
	_ = (fusefs.FileReader)((*dataHandle)(nil))
	_ = (fusefs.FileWriter)((*dataHandle)(nil))
	_ = (fusefs.FileReleaser)((*dataHandle)(nil))
	_ = (fusefs.FilePoller)((*dataHandle)(nil))
)

// Poll: the data file's readiness includes the rest of a message an
// earlier read left, which ReadData keeps (DataReady sees it).
func (h *dataHandle) Poll(ctx context.Context, in *fuse.PollIn, out *fuse.PollOut) syscall.Errno {
	h.poller.poll(h.node, in, out, false, h.live() != 0)
	return 0
}

func (h *dataHandle) Release(ctx context.Context) syscall.Errno {
	h.poller.release()
	return h.ref.Release(ctx)
}

func (h *dataHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if errno := h.live(); errno != 0 {
		return nil, errno
	}
	n, err := h.msgs.ReadData(ctx, dest, off)
	if err != nil {
		return nil, h.fail("read "+h.name, err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write sends data as one message. The kernel hands FUSE at most maxWrite
// bytes, and at most maxWrite/pageSize pages of the writer's buffer, at a
// time, and splits a longer write(2) into several. So that no message goes
// out split, a message through data is at most maxDataMsg bytes: a write
// of up to that size spans at most maxWrite/pageSize pages however its
// buffer is aligned, so it always arrives whole, and every piece but the
// last of a split write is longer, so it is refused with EMSGSIZE
// (larger messages go through the tx ring).
func (h *dataHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := h.live(); errno != 0 {
		return 0, errno
	}
	if len(data) > maxDataMsg {
		return 0, h.fail("write "+h.name, core.Errorf(fi.EMSGSIZE, "a message through data is at most %d bytes (FUSE hands the daemon at most %d bytes or %d pages at a time and would split a longer write); use the tx ring for larger ones", maxDataMsg, maxWrite, maxWrite/pageSize))
	}
	w, ok := h.msgs.(dataWriter)
	if !ok {
		return 0, syscall.EACCES // read-only: the kernel refuses to open it for writing
	}
	if err := w.WriteData(ctx, data); err != nil {
		return 0, h.fail("write "+h.name, err)
	}
	return uint32(len(data)), 0
}
