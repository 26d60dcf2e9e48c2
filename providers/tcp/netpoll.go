package tcp

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A connected endpoint's socket is not in Go's netpoller: the netpoller
// watches every socket it has all the time, so while an engine group reads
// a socket itself, each arriving message would still wake one of the
// runtime's threads for nothing. Instead the endpoint owns the file
// descriptor (non-blocking) and asks for readiness only when a goroutine is
// about to wait for it: each direction is registered EPOLLONESHOT with one
// process-wide epoll set, under its own descriptor (the socket and a dup of
// it), and re-armed by whoever finds the socket empty (or full) and parks.
// One goroutine waits on the set and wakes the parked goroutine through its
// channel. While an engine group polls the socket, both registrations are
// taken out of the set (detach), not just left disarmed: the socket calls
// every registration it has on each segment that arrives, and that call, a
// lock with interrupts off, cost a sixth as much as the rest of TCP's
// receive path.
// Whoever next waits puts its registration back.

// netpoller is the process's epoll set of endpoint sockets.
type netpoller struct {
	epfd int
	mu   sync.Mutex
	next uint32
	wake map[uint32]chan struct{} // by registration id
}

var (
	pollerOnce sync.Once
	thePoller  *netpoller
	pollerErr  error
)

// getPoller returns the process's netpoller, starting it the first time.
func getPoller() (*netpoller, error) {
	pollerOnce.Do(func() {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			pollerErr = os.NewSyscallError("epoll_create1", err)
			return
		}
		thePoller = &netpoller{epfd: fd, wake: map[uint32]chan struct{}{}}
		go thePoller.run()
	})
	return thePoller, pollerErr
}

func (p *netpoller) run() {
	evs := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(p.epfd, evs, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			// Cannot happen with a valid set and buffer; say so rather
			// than spin.
			fmt.Fprintf(os.Stderr, "tcp: epoll_wait: %v\n", err)
			return
		}
		p.mu.Lock()
		for _, ev := range evs[:n] {
			if ch := p.wake[uint32(ev.Fd)]; ch != nil {
				kick(ch)
			}
		}
		p.mu.Unlock()
	}
}

// armRetry is how soon a waiter whose descriptor could not be put in the
// epoll set looks at it again.
const armRetry = 10 * time.Millisecond

// watch is one descriptor's registration: armed, it wakes ch once.
type watch struct {
	p      *netpoller
	fd     int
	id     uint32
	events uint32
	ch     chan struct{}
	mu     sync.Mutex  // orders arm, detach and remove
	out    atomic.Bool // taken out of the set by detach; arm puts it back
}

// add registers fd for events (EPOLLIN or EPOLLOUT), disarmed; an event
// sends on ch once per arm.
func (p *netpoller) add(fd int, events uint32, ch chan struct{}) (*watch, error) {
	p.mu.Lock()
	p.next++
	for p.wake[p.next] != nil || p.next == 0 {
		p.next++
	}
	w := &watch{p: p, fd: fd, id: p.next, events: events, ch: ch}
	p.wake[w.id] = ch
	p.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLONESHOT, Fd: int32(w.id)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		p.mu.Lock()
		delete(p.wake, w.id)
		p.mu.Unlock()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return w, nil
}

// arm asks for one wake-up when the descriptor becomes ready, or at once
// if it is ready now. The caller holds the lock that keeps fd open.
func (w *watch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	op := unix.EPOLL_CTL_MOD
	if w.out.Load() {
		op = unix.EPOLL_CTL_ADD
	}
	ev := unix.EpollEvent{Events: w.events | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(w.id)}
	if err := unix.EpollCtl(w.p.epfd, op, w.fd, &ev); err != nil {
		// Not watched (ENOMEM, ENOSPC of max_user_watches): wake the
		// waiter a little later rather than let it sleep with nothing to
		// wake it, or spin while the shortage lasts.
		ch := w.ch
		time.AfterFunc(armRetry, func() { kick(ch) })
		return
	}
	w.out.Store(false)
}

// detach takes the descriptor out of the set until the next arm; a waiter
// armed before is not woken by it. It costs one atomic load when the
// descriptor is out already. The caller holds the lock that keeps fd open.
func (w *watch) detach() {
	if w.out.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.out.Load() {
		unix.EpollCtl(w.p.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
		w.out.Store(true)
	}
}

// remove unregisters the descriptor; the caller closes it afterwards.
func (w *watch) remove() {
	w.detach()
	w.p.mu.Lock()
	delete(w.p.wake, w.id)
	w.p.mu.Unlock()
}
