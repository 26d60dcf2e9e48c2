package fs

import (
	"sync"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Poll events, in the values the FUSE protocol carries (Linux's).
const (
	pollIn  = 0x1 | 0x40  // POLLIN | POLLRDNORM
	pollOut = 0x4 | 0x100 // POLLOUT | POLLWRNORM
)

// readiness reports whether a read of a blocking file would not block
// now, and, when it would, gives a channel closed when that may change
// (core's CQ.Ready, EQ.Ready, PEP.Ready, EP.DataReady, SRX.DataReady);
// events are the poll's (pollIn, pollOut...).
type readiness func(events uint32) (ready bool, changed <-chan struct{})

// poller answers poll(2), select(2) and epoll(7) on a blocking file:
// POLLIN when a read at offset 0 would not block (rest: bytes of an
// earlier read are waiting), POLLOUT always if the file is writable. When
// the kernel will wait (FUSE_POLL_SCHEDULE_NOTIFY) and the file is not
// ready, one goroutine per open file waits for the change and sends the
// kernel FUSE_NOTIFY_POLL; it ends then, or when the file is released.
type poller struct {
	ready    readiness
	writable bool

	mu       sync.Mutex
	watching bool
	released chan struct{} // closed by release
}

func newPoller(ready readiness, writable bool) *poller {
	return &poller{ready: ready, writable: writable, released: make(chan struct{})}
}

// poll fills out for in, a poll of a file of node; rest says bytes of an
// earlier read are waiting, gone that the file's object is gone (a read
// fails at once).
func (p *poller) poll(node *fusefs.Inode, in *fuse.PollIn, out *fuse.PollOut, rest, gone bool) {
	ready, changed := true, (<-chan struct{})(nil)
	if !rest && !gone {
		ready, changed = p.ready(in.Events)
	}
	if p.writable {
		out.Revents |= pollOut
	}
	if ready {
		out.Revents |= pollIn
		return
	}
	if in.Flags&fuse.FUSE_POLL_SCHEDULE_NOTIFY == 0 || changed == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watching {
		return
	}
	p.watching = true
	kh := in.Kh // in is the request's buffer, reused once Poll returns
	go func() {
		select {
		case <-changed:
		case <-p.released:
			return
		}
		p.mu.Lock()
		p.watching = false
		p.mu.Unlock()
		// The kernel polls again; still not ready, it asks for
		// another notification.
		node.NotifyPoll(kh)
	}()
}

// release ends the watch of a closed file.
func (p *poller) release() { close(p.released) }
