// Package sleeper lets many goroutines each wait on a vector of futex
// words, as futex_waitv(2) does, without each holding an OS thread: one
// thread of its own submits every wait to an io_uring as an
// IORING_OP_FUTEX_WAITV request (Linux >= 6.7) and hands each completion
// to the goroutine that waits on it, which meanwhile is parked on a
// channel. The engine's sleeping groups wait this way (core, "The ring
// engine"), so an idle daemon holds one thread for all of them rather
// than one per group.
//
// The io_uring is set up by hand with golang.org/x/sys/unix (io_uring_setup,
// mmap of its rings, io_uring_enter): the structures below are the kernel's
// (include/uapi/linux/io_uring.h). It is made with
// IORING_SETUP_SINGLE_ISSUER and IORING_SETUP_DEFER_TASKRUN: only the
// sleeper's thread submits, and a wake-up's completion is posted when that
// thread next waits in io_uring_enter, which is where it always is.
package sleeper

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/ring"
)

// The kernel's values (include/uapi/linux/io_uring.h, futex.h).
const (
	opAsyncCancel = 14 // IORING_OP_ASYNC_CANCEL
	opFutexWait   = 51 // IORING_OP_FUTEX_WAIT (Linux 6.7)
	opFutexWaitv  = 53 // IORING_OP_FUTEX_WAITV (Linux 6.7)

	setupSingleIssuer = 1 << 12 // IORING_SETUP_SINGLE_ISSUER
	setupDeferTaskrun = 1 << 13 // IORING_SETUP_DEFER_TASKRUN
	featSingleMmap    = 1 << 0  // IORING_FEAT_SINGLE_MMAP
	enterGetevents    = 1 << 0  // IORING_ENTER_GETEVENTS

	offSQRing = 0          // IORING_OFF_SQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	futex2Size32     = 2          // FUTEX2_SIZE_U32, shared (no FUTEX2_PRIVATE)
	futexBitsetMatch = 0xffffffff // FUTEX_BITSET_MATCH_ANY

	entries = 256 // SQ entries; the kernel makes the CQ twice as big
)

// user_data of the requests that are not a Wait's.
const (
	udCancel = 0 // an ASYNC_CANCEL: its completion says nothing
	udWord   = 1 // the FUTEX_WAIT on the sleeper's own word
	udFirst  = 2 // the first Wait's
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// sqOffsets is struct io_sqring_offsets.
type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqOffsets is struct io_cqring_offsets.
type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// sqe is struct io_uring_sqe (64 bytes), with the fields the futex and
// cancel operations use named as they use them.
type sqe struct {
	opcode  uint8
	flags   uint8
	ioprio  uint16
	fd      int32  // FUTEX_WAIT: the futex2 flags
	off     uint64 // addr2; FUTEX_WAIT: the value
	addr    uint64 // the word, the futex_waitv array, or the user_data to cancel
	len     uint32 // FUTEX_WAITV: the number of words
	opFlags uint32
	data    uint64 // user_data
	bufIdx  uint16
	persona uint16
	fileIdx int32
	addr3   uint64 // FUTEX_WAIT: the bitset mask
	pad     uint64
}

// cqe is struct io_uring_cqe (16 bytes).
type cqe struct {
	data  uint64
	res   int32
	flags uint32
}

// ErrClosed is returned by Wait once the sleeper is closed.
var ErrClosed = errors.New("sleeper: closed")

// A Sleeper waits for the goroutines that call Wait, in one thread.
type Sleeper struct {
	// word is the sleeper's own futex: Wait and Close bump and wake it
	// so that the thread, waiting in io_uring_enter, looks at pending.
	word uint32

	mu      sync.Mutex
	pending []*request   // Waits and cancels not yet submitted
	closed  bool         // Close was called
	err     error        // why the sleeper ended: ErrClosed, or its io_uring failed
	waiting atomic.Int64 // Waiting

	// Used by the sleeper's thread only:
	fd         int
	rings      []byte // the SQ and CQ rings, one mapping (IORING_FEAT_SINGLE_MMAP)
	sqes       []sqe
	sqHead     *uint32
	sqTail     *uint32
	sqMask     uint32
	cqHead     *uint32
	cqTail     *uint32
	cqMask     uint32
	cqes       []cqe
	live       map[uint64]*request // submitted, by user_data
	next       uint64
	wordArmed  bool
	notHandled int // submitted requests the kernel has not consumed
}

// request is one Wait (or the cancel of one: cancel set).
type request struct {
	ws     []ring.Waitv // read by the kernel when it consumes the request
	id     uint64       // its user_data, set when submitted
	done   chan int32   // the completion's res
	cancel *request     // an ASYNC_CANCEL of this Wait
}

// New starts a sleeper. It fails when the kernel has no io_uring (ENOSYS),
// refuses it (EPERM: kernel.io_uring_disabled), or has no futex
// operations in it (before Linux 6.7): then wait with ring.FutexWaitv.
func New() (*Sleeper, error) {
	s := &Sleeper{live: map[uint64]*request{}, next: udFirst}
	started := make(chan error, 1)
	go s.run(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return s, nil
}

// Wait sleeps until one of the words addrs[i] is woken (ring.FutexWake),
// as long as every addrs[i] holds vals[i] when the kernel takes the
// request, or until timeout (<= 0: no limit). Its results are those of
// ring.FutexWaitv: the index of a woken word; -1 and nil to look again
// (a word did not hold its value); -1 and ring.ErrTimeout; -1 and an
// error (bad arguments, ErrClosed, a failure of the io_uring).
//
// The calling goroutine is parked meanwhile, holding no thread unless it
// is locked to one (runtime.LockOSThread): unlock it first. The words
// must stay where they are until Wait returns.
func (s *Sleeper) Wait(addrs []*uint32, vals []uint32, timeout time.Duration) (int, error) {
	r := &request{ws: make([]ring.Waitv, len(addrs)), done: make(chan int32, 1)}
	if err := ring.FillWaitv(r.ws, addrs, vals); err != nil {
		return -1, err
	}
	if err := s.submit(r); err != nil {
		return -1, err
	}
	var res int32
	if timeout > 0 {
		t := time.NewTimer(timeout)
		select {
		case res = <-r.done:
		case <-t.C:
			// The request completes, cancelled, woken, or failed by the
			// sleeper's end, before Wait returns: its words are the
			// caller's again after.
			s.submit(&request{cancel: r})
			res = <-r.done
			if res == -int32(unix.ECANCELED) {
				return -1, ring.ErrTimeout
			}
		}
		t.Stop()
	} else {
		res = <-r.done
	}
	runtime.KeepAlive(addrs)
	switch {
	case res >= 0:
		return int(res), nil
	case res == -int32(unix.EAGAIN), res == -int32(unix.EINTR), res == -int32(unix.ECANCELED):
		return -1, nil
	case res == errClosed:
		s.mu.Lock()
		defer s.mu.Unlock()
		return -1, s.err
	}
	return -1, os.NewSyscallError("io_uring futex_waitv", unix.Errno(-res))
}

// errClosed is the res a request gets when the sleeper closes under it.
const errClosed = -1 << 31

// submit queues r for the sleeper's thread and wakes it.
func (s *Sleeper) submit(r *request) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.pending = append(s.pending, r)
	s.mu.Unlock()
	s.kick()
	return nil
}

// kick wakes the sleeper's thread.
func (s *Sleeper) kick() {
	atomic.AddUint32(&s.word, 1)
	ring.FutexWake(&s.word)
}

// Waiting is the number of Waits the kernel holds: submitted, not yet
// completed.
func (s *Sleeper) Waiting() int { return int(s.waiting.Load()) }

// Close ends the sleeper: every Wait under way returns ErrClosed, and so
// does every later one.
func (s *Sleeper) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.kick()
	return nil
}

// run is the sleeper's thread: it sets the io_uring up, reports how that
// went on started, then submits what is pending and hands out
// completions, until Close.
func (s *Sleeper) run(started chan<- error) {
	// The io_uring's single issuer is this thread: it stays locked to it,
	// and the thread ends with it.
	runtime.LockOSThread()
	if err := s.setup(); err != nil {
		started <- err
		return
	}
	if err := s.probe(); err != nil {
		s.teardown()
		started <- err
		return
	}
	started <- nil
	var err error
	for err == nil {
		v := atomic.LoadUint32(&s.word)
		s.mu.Lock()
		reqs, closed := s.pending, s.closed
		s.pending = nil
		s.mu.Unlock()
		if closed {
			err = ErrClosed
			break
		}
		for _, r := range reqs {
			if err = s.queue(r); err != nil {
				break
			}
		}
		if err == nil && !s.wordArmed {
			// Woken by the next kick after v, or at once if one came
			// since v was read.
			err = s.push(s.wordWait(v, udWord))
			s.wordArmed = err == nil
		}
		if err == nil {
			err = s.enter(1)
		}
		if err == nil {
			s.reap()
		}
	}
	s.teardown()
	s.mu.Lock()
	s.err = err
	reqs := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, r := range reqs {
		if r.cancel == nil {
			r.done <- errClosed
		}
	}
	for _, r := range s.live {
		r.done <- errClosed
	}
	s.live = nil
	s.waiting.Store(0)
}

// wordWait is the FUTEX_WAIT on the sleeper's word while it holds v.
func (s *Sleeper) wordWait(v uint32, data uint64) *sqe {
	return &sqe{opcode: opFutexWait, fd: futex2Size32, addr: uint64(uintptr(unsafe.Pointer(&s.word))), off: uint64(v), addr3: futexBitsetMatch, data: data}
}

// setup makes the io_uring and maps its rings.
func (s *Sleeper) setup() error {
	p := params{flags: setupSingleIssuer | setupDeferTaskrun}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, entries, uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return os.NewSyscallError("io_uring_setup", e)
	}
	s.fd = int(fd)
	if p.features&featSingleMmap == 0 {
		unix.Close(s.fd)
		return errors.New("io_uring without IORING_FEAT_SINGLE_MMAP")
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	m, err := unix.Mmap(s.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(s.fd)
		return os.NewSyscallError("mmap io_uring rings", err)
	}
	se, err := unix.Mmap(s.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(m)
		unix.Close(s.fd)
		return os.NewSyscallError("mmap io_uring SQEs", err)
	}
	s.rings = m
	s.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&se[0])), p.sqEntries)
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }
	s.sqHead, s.sqTail, s.sqMask = u32(p.sqOff.head), u32(p.sqOff.tail), *u32(p.sqOff.ringMask)
	s.cqHead, s.cqTail, s.cqMask = u32(p.cqOff.head), u32(p.cqOff.tail), *u32(p.cqOff.ringMask)
	s.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&m[p.cqOff.cqes])), p.cqEntries)
	// The SQ's index array maps each slot to the SQE of the same number,
	// for good.
	array := unsafe.Slice(u32(p.sqOff.array), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	return nil
}

// probe checks that the kernel takes FUTEX_WAIT and FUTEX_WAITV: each on
// the sleeper's word with a value it does not hold must complete with
// EAGAIN (an unknown operation is EINVAL).
func (s *Sleeper) probe() error {
	v := atomic.LoadUint32(&s.word) + 1
	w := []ring.Waitv{{}}
	if err := ring.FillWaitv(w, []*uint32{&s.word}, []uint32{v}); err != nil {
		return err
	}
	for _, e := range []*sqe{s.wordWait(v, udFirst), {opcode: opFutexWaitv, addr: uint64(uintptr(unsafe.Pointer(&w[0]))), len: 1, data: udFirst + 1}} {
		if err := s.push(e); err != nil {
			return err
		}
	}
	for got := 0; got < 2; {
		if err := s.enter(2 - got); err != nil {
			return err
		}
		for ; *s.cqHead != atomic.LoadUint32(s.cqTail); got++ {
			c := s.cqes[*s.cqHead&s.cqMask]
			atomic.StoreUint32(s.cqHead, *s.cqHead+1)
			if c.res != -int32(unix.EAGAIN) {
				op := "IORING_OP_FUTEX_WAIT"
				if c.data != udFirst {
					op = "IORING_OP_FUTEX_WAITV"
				}
				return fmt.Errorf("io_uring %s (Linux >= 6.7): %v", op, unix.Errno(-c.res))
			}
		}
	}
	runtime.KeepAlive(w)
	return nil
}

// teardown unmaps the rings and closes the io_uring, which cancels what
// it still has.
func (s *Sleeper) teardown() {
	unix.Munmap(s.rings)
	unix.Munmap(unsafe.Slice((*byte)(unsafe.Pointer(&s.sqes[0])), len(s.sqes)*int(unsafe.Sizeof(sqe{}))))
	unix.Close(s.fd)
}

// queue puts r's request in the SQ: a Wait's FUTEX_WAITV, or an
// ASYNC_CANCEL of a Wait (nothing if that one has completed).
func (s *Sleeper) queue(r *request) error {
	if c := r.cancel; c != nil {
		if _, ok := s.live[c.id]; !ok || c.id == 0 {
			return nil
		}
		return s.push(&sqe{opcode: opAsyncCancel, addr: c.id, data: udCancel})
	}
	r.id = s.next
	s.next++
	s.live[r.id] = r
	s.waiting.Add(1)
	return s.push(&sqe{opcode: opFutexWaitv, addr: uint64(uintptr(unsafe.Pointer(&r.ws[0]))), len: uint32(len(r.ws)), data: r.id})
}

// push puts one SQE in the SQ, first handing the kernel those already
// there if it is full.
func (s *Sleeper) push(e *sqe) error {
	tail := *s.sqTail
	if tail-atomic.LoadUint32(s.sqHead) == uint32(len(s.sqes)) {
		if err := s.enter(0); err != nil {
			return err
		}
	}
	s.sqes[tail&s.sqMask] = *e
	atomic.StoreUint32(s.sqTail, tail+1)
	s.notHandled++
	return nil
}

// enter submits the SQEs queued and waits for at least wait completions
// (0: does not wait). An interrupted wait returns nil: look again.
func (s *Sleeper) enter(wait int) error {
	flags := uintptr(0)
	if wait > 0 {
		flags = enterGetevents
	}
	for {
		n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(s.fd), uintptr(s.notHandled), uintptr(wait), flags, 0, 0)
		if e == 0 {
			s.notHandled -= int(n)
			if s.notHandled > 0 && wait == 0 {
				continue // the rest of a full SQ
			}
			return nil
		}
		switch e {
		case unix.EINTR:
			return nil
		case unix.EAGAIN, unix.EBUSY:
			// The kernel is short of room for completions: make some by
			// reaping, then try again.
			if s.reap() == 0 {
				time.Sleep(time.Millisecond)
			}
			continue
		}
		return os.NewSyscallError("io_uring_enter", e)
	}
}

// reap hands out the completions there are and returns how many.
func (s *Sleeper) reap() int {
	n := 0
	head := *s.cqHead
	for ; head != atomic.LoadUint32(s.cqTail); head++ {
		c := s.cqes[head&s.cqMask]
		n++
		switch c.data {
		case udCancel:
		case udWord:
			s.wordArmed = false
		default:
			if r, ok := s.live[c.data]; ok {
				delete(s.live, c.data)
				s.waiting.Add(-1)
				r.done <- c.res
			}
		}
	}
	atomic.StoreUint32(s.cqHead, head)
	return n
}
