package core

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/core/sleeper"
)

// The engine consumes the work queues (ep/N/tx, ep/N/rx) of every enabled
// endpoint whose rings were made (at the first open of either file:
// EP.Ring). Queues are served by groups of at most groupSize; each group is
// one goroutine that polls its queues without system calls while there is
// work, and after spinFor idle sets RING_NEED_WAKEUP on all of them and
// sleeps in one futex_waitv on their wake words and its own control word.
// After directFor in its own thread (as long as few groups sleep that
// way: wait) that wait is the process's sleeper's (core/sleeper: io_uring's
// FUTEX_WAITV, Linux >= 6.7), for which the group's goroutine parks
// without a thread, so a sleeping daemon holds one thread for all its
// idle groups; where the kernel has no such io_uring operation, the group
// waits in futex_waitv(2) itself, a blocked thread per groupSize queues.
//
// An endpoint whose requests keep a group busy becomes hot: if its provider
// endpoint is a Poller, the group polls it on every pass, so that its
// incoming data is placed and completed on the group's goroutine too. When
// the group goes idle it parks its hot endpoints, handing their progress
// back to the provider's goroutines. The descriptors of the hot endpoints
// that have one (FDPoller) are asked about with one poll(2) per pass, so
// that a pass over quiet sockets costs one system call, not one read each.
const (
	groupSize = 127 // futex_waitv takes 128 words: the queues and the control word
	spinFor   = 50 * time.Microsecond
	// spinPasses is the fewest empty passes before a sleep, as well as
	// spinFor: a pass ends in sched_yield, which may give the CPU to
	// another thread for longer than spinFor, and a group that slept after
	// every such yield would hand its sockets back to the provider's
	// goroutines in the middle of a conversation.
	spinPasses = 64
	// sleepMax bounds a sleep, as a safety net: a group wakes at least this
	// often even if a wake-up were lost.
	sleepMax = time.Minute
	// reschedEvery is how long a busy worker runs before it passes through
	// the Go scheduler (unlocked), below the 10 ms after which the runtime
	// preempts a goroutine that has not.
	reschedEvery = 5 * time.Millisecond
)

// workQueue is one work ring of one endpoint or shared receive context.
type workQueue struct {
	to      wrTaker
	rs      *epRings
	r       *ring.Ring
	kind    OpKind // OpSend for tx, OpRecv for rx
	g       *group
	blocked atomic.Bool // the provider's queue is full; wait for a completion
	// Used by the group's worker only:
	broken bool    // the producer broke the indices (consume)
	head   uint32  // the ring's head: stored into the ring, never loaded from it, so a client writing head cannot replay requests
	wr     ring.WR // the request being taken: a pointer to it goes to the taker, which a local would make an allocation per request
}

// wrTaker is what a work queue's requests go to: an endpoint (EP), or a
// shared receive context (SRX).
type wrTaker interface {
	// lockRing takes the lock that serialises taking requests with
	// closing the ring, and reports whether the ring is still served;
	// unlockRing lets it go.
	lockRing() bool
	unlockRing()
	// take starts the request w from the queue q; fi.EAGAIN: no room
	// until a completion (the queue is blocked until unblock).
	take(w *ring.WR, q *workQueue) error
	// requestFailed reports a request that could not be taken, as an
	// error completion of an operation of kind.
	requestFailed(w *ring.WR, kind OpKind, err error)
	// flush ends a pass over a transmit queue: what the provider held
	// of the requests it took (Flusher) goes out.
	flush()
}

// ready reports whether the queue has requests the provider can take.
func (q *workQueue) ready() bool { return q.r.Tail() != q.head && !q.blocked.Load() && !q.broken }

// name is the queue's file name: tx or rx.
func (q *workQueue) name() string {
	if q.kind.IsRecv() {
		return "rx"
	}
	return "tx"
}

// unblock lets the queue be served again after a completion freed room.
func (q *workQueue) unblock() {
	if q.blocked.CompareAndSwap(true, false) {
		q.g.kick()
	}
}

type engine struct {
	mu      sync.Mutex
	groups  []*group
	cpus    *unix.CPUSet // where new shared groups' threads run; nil: anywhere
	allowed *unix.CPUSet // the process's CPUs (read by New), which a pinned worker's thread has while unlocked
	logf    func(format string, a ...any)
}

type group struct {
	e             *engine
	placed        bool // the group of the endpoints placed on cpu (attr/engine_cpu); false: a shared group, cpu -1
	cpu           int
	cpus, allowed *unix.CPUSet // where its thread runs (the engine's when the group started, or cpu), and the process's CPUs
	pinFailed     bool         // setCPUs failed once; used by the worker only
	// word is the control futex: add, remove and unblock bump it to wake the
	// worker. It lives in Go memory (never moved, never unmapped), so a late
	// kick of a stopped group is harmless.
	word *uint32

	mu     sync.Mutex
	queues []*workQueue // replaced, never modified in place, so the worker can use a snapshot
	stop   bool

	// hot are the endpoints the worker polls until it next sleeps. Only
	// the worker uses it, and remove while it holds iter.
	hot []*epRings
	// pfds is the worker's poll(2) array, one entry per hot endpoint.
	pfds []unix.PollFd

	// iter is held by the worker whenever it touches the rings of its
	// snapshot (not while it sleeps); remove waits on it so that a removed
	// queue's ring is never touched after its endpoint unmaps it.
	iter sync.Mutex
}

// add starts serving an endpoint's tx and rx queues (a shared receive
// context's rx alone: tx nil), in one group: with cpu -1 a shared group on
// the engine's CPUs, else the group of the endpoints placed on that CPU,
// pinned to it.
func (e *engine) add(tx, rx *workQueue, cpu int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	placed := cpu >= 0
	var g *group
	for _, c := range e.groups {
		c.mu.Lock()
		if c.placed == placed && c.cpu == cpu && len(c.queues)+2 <= groupSize {
			g = c
		}
		c.mu.Unlock()
		if g != nil {
			break
		}
	}
	if g == nil {
		g = &group{e: e, placed: placed, cpu: cpu, cpus: e.cpus, allowed: e.allowed, word: new(uint32)}
		if placed {
			g.cpus = new(unix.CPUSet)
			g.cpus.Set(cpu)
		}
		e.groups = append(e.groups, g)
		go g.run()
	}
	g.mu.Lock()
	qs := g.queues[:len(g.queues):len(g.queues)]
	for _, q := range []*workQueue{tx, rx} {
		if q != nil {
			q.g = g
			qs = append(qs, q)
		}
	}
	g.queues = qs
	g.mu.Unlock()
	g.kick()
}

// remove stops serving an endpoint's queues; a group left empty ends.
func (e *engine) remove(rs *epRings) {
	e.mu.Lock()
	defer e.mu.Unlock()
	g := rs.rx.g
	g.mu.Lock()
	qs := make([]*workQueue, 0, len(g.queues))
	for _, x := range g.queues {
		if x.rs != rs {
			qs = append(qs, x)
		}
	}
	g.queues = qs
	if len(qs) == 0 {
		g.stop = true
		for i, x := range e.groups {
			if x == g {
				e.groups = append(e.groups[:i], e.groups[i+1:]...)
				break
			}
		}
	}
	g.mu.Unlock()
	g.kick()
	g.iter.Lock() // the worker's current pass, which may use rs, ends
	for i, x := range g.hot {
		if x == rs {
			g.hot = append(g.hot[:i], g.hot[i+1:]...)
			rs.hot = false
			rs.poller.Park()
			break
		}
	}
	g.iter.Unlock()
}

// kick wakes the worker serving the queue q (and its endpoint's other
// queue): the doorbell (ctl verb kick) of a producer that posts to a ring
// without futex_wake.
func (e *engine) kick(q *workQueue) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if g := q.g; g != nil {
		g.kick()
	}
}

// mayRunOn reports whether cpu is one of the process's CPUs.
func (e *engine) mayRunOn(cpu int) bool { return cpu >= 0 && e.allowed.IsSet(cpu) }

// kick wakes the group's worker.
func (g *group) kick() {
	atomic.AddUint32(g.word, 1)
	ring.FutexWake(g.word)
}

func (g *group) run() {
	// The worker keeps its thread while it works: its raw sched_yield is
	// that thread's, and the Go scheduler does not move it between threads
	// in mid-conversation (perf sched showed an unlocked worker on three
	// threads in one run). It lets go of it only in unlocked; the thread
	// it holds when the group ends ends with it.
	runtime.LockOSThread()
	g.pin()
	var idle time.Time    // when the current idle spell began
	passes := 0           // empty passes in it
	resched := time.Now() // when the worker last passed through the Go scheduler
	reschedIfDue := func() {
		if time.Since(resched) >= reschedEvery {
			g.unlocked(runtime.Gosched)
			resched = time.Now()
		}
	}
	loops := 0
	for {
		// The clock is read every 16 passes: even passes that write and
		// read 1 MiB messages come well inside the runtime's 10 ms.
		if loops++; loops%16 == 0 {
			reschedIfDue()
		}
		g.iter.Lock()
		g.mu.Lock()
		qs, stop := g.queues, g.stop
		g.mu.Unlock()
		if stop {
			g.iter.Unlock()
			// The thread ends with the goroutine, unless it is the main
			// thread, which the runtime parks instead: unpinned.
			g.setCPUs(g.allowed, "unpinning")
			return
		}
		// Sends first, then the sockets, then the receives posted: what
		// the reads bring is most likely an answer, for a receive posted
		// earlier, and a receive posted now is for a later message, which
		// taking it first would only delay. (A message that does arrive
		// for a receive posted in the same pass waits in tcp's staging
		// buffer, or in rxm's unexpected queue, a copy, until the receive
		// is taken at the end of the pass.)
		sent := g.take(qs, OpSend)
		busy := sent
		if g.pollHot(sent) {
			busy = true
		}
		if g.take(qs, OpRecv) {
			busy = true
		}
		switch {
		case busy:
			passes = 0
			g.iter.Unlock()
		case passes < spinPasses || time.Since(idle) < spinFor:
			if passes == 0 {
				idle = time.Now() // the clock is read once per idle spell
			}
			passes++
			g.iter.Unlock()
			// Let other threads run: the application a completion just
			// woke may be queued behind this spin on the same CPU. Not
			// runtime.Gosched, which wakes an idle thread of the runtime
			// each time to look for goroutines.
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		default:
			g.sleep() // unlocks iter while asleep
			passes = 0
			// Asleep, the worker did not pass through the scheduler
			// either: after 10 ms the runtime preempts it at its next
			// check, awake.
			reschedIfDue()
		}
	}
}

// take consumes the ready queues of kind (OpSend: tx, OpRecv: rx) and
// reports whether it took any request. An endpoint whose queue it took from
// becomes hot.
func (g *group) take(qs []*workQueue, kind OpKind) bool {
	took := false
	for _, q := range qs {
		if q.kind != kind || !q.ready() || q.consume() == 0 {
			continue
		}
		took = true
		if kind == OpSend {
			q.rs.sent = true
		}
		if !q.rs.hot && q.rs.poller != nil {
			q.rs.hot = true
			g.hot = append(g.hot, q.rs)
		}
	}
	return took
}

// pin keeps the worker's thread on the engine's CPUs, if it has any.
func (g *group) pin() { g.setCPUs(g.cpus, "pinning") }

// setCPUs sets the CPUs the worker's thread may run on, if the engine has
// CPUs of its own; the first failure of a group is logged.
func (g *group) setCPUs(set *unix.CPUSet, what string) error {
	if g.cpus == nil {
		return nil
	}
	err := unix.SchedSetaffinity(0, set)
	if err != nil && !g.pinFailed {
		g.pinFailed = true
		whose := "a group's thread"
		if g.placed {
			whose = fmt.Sprintf("the thread of CPU %d's group", g.cpu)
		}
		g.e.logf("engine: %s %s: %v", what, whose, err)
	}
	return err
}

// unlocked runs f, a pass through the Go scheduler, with the worker's
// thread unlocked. The runtime preempts a goroutine that has run for 10 ms
// without such a pass, and a busy worker never blocks. For a goroutine
// locked to its thread, that preemption (and a runtime.Gosched) is a
// hand-off through two other threads, tens of microseconds, after which
// the runtime's monitor thread runs every 20 us for a while, each time on
// a CPU the worker or a client needs (docs/bench.md, "The Go runtime's
// preemption").
// Unlocked, the pass costs a third of a microsecond.
//
// Unlocked, the thread may run other goroutines, and threads the runtime
// starts meanwhile are cloned from it, CPU mask and all (while it is
// locked, the runtime's newm clones its template thread instead). So a
// pinned worker's thread gets the process's CPUs back first (or every CPU
// the kernel allows, if the process's no longer work), and the thread the
// worker comes back on, the same or another, is pinned after.
func (g *group) unlocked(f func()) {
	if g.setCPUs(g.allowed, "unpinning") != nil {
		var all unix.CPUSet
		for c := 0; c < 8*int(unsafe.Sizeof(all)); c++ {
			all.Set(c)
		}
		g.setCPUs(&all, "unpinning")
	}
	runtime.UnlockOSThread()
	f()
	runtime.LockOSThread()
	g.pin()
}

// pollHot has the hot endpoints make progress and reports whether any
// did. After a pass that sent nothing it asks about the descriptors of
// those that have one (FDPoller) with one poll(2) and no timeout, so that
// quiet sockets cost one system call per pass. After a pass that sent, it
// skips the poll(2), since an answer or (between two endpoints of this
// daemon) the message itself is likely there already, and it polls the
// endpoints that did not send first: a message sent to a local peer is
// placed before the sender's own socket is read.
func (g *group) pollHot(sent bool) bool {
	readAll := sent // without asking poll(2)
	if !sent {
		g.pfds = g.pfds[:0]
		fds := false
		for _, rs := range g.hot {
			fd := -1 // poll(2) skips a negative descriptor and reports nothing
			if rs.fdPoller != nil {
				fd = rs.fdPoller.PollFD()
			}
			fds = fds || fd >= 0
			g.pfds = append(g.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		if fds {
			// EINTR: let the reads find out.
			_, err := unix.Poll(g.pfds, 0)
			readAll = err != nil
		}
	}
	busy := false
	for _, senders := range [2]bool{false, true} {
		for i, rs := range g.hot {
			if rs.sent != senders {
				continue
			}
			var made bool
			switch {
			case rs.fdPoller == nil:
				made = rs.poller.Poll()
			case readAll:
				made = rs.fdPoller.PollReady(true)
			default:
				made = rs.fdPoller.PollReady(g.pfds[i].Revents != 0)
			}
			busy = busy || made
		}
		if !sent {
			break // nobody sent: one round
		}
	}
	for _, rs := range g.hot {
		rs.sent = false
	}
	return busy
}

// sleep waits until a queue may have work: the protocol of docs/abi.md, on
// all the group's queues at once. It is called with iter held and returns
// with it released. It does not hold iter while asleep, so after waking it
// clears the flag only on the queues the group has then, which are mapped
// for as long as it holds iter.
func (g *group) sleep() {
	for _, rs := range g.hot {
		rs.hot = false
		rs.poller.Park()
	}
	clear(g.hot)
	g.hot = g.hot[:0]
	// The control word first, then the queues as they are now, not as
	// the pass saw them: a queue added since (engine.add: a ring made
	// when first mapped) is in the set, or its kick comes after this load
	// and the wait returns at once. With the pass's list, an add between
	// the pass and this load left its ring out of the set with the kick
	// already spent, and a request on it waited for another wake-up.
	val := atomic.LoadUint32(g.word)
	g.mu.Lock()
	qs := g.queues
	g.mu.Unlock()
	words := make([]*uint32, 0, len(qs)+1)
	vals := make([]uint32, 0, len(qs)+1)
	words = append(words, g.word)
	vals = append(vals, val)
	for _, q := range qs {
		w := q.r.WakeWord()
		words = append(words, w)
		vals = append(vals, atomic.LoadUint32(w))
		q.r.SetFlags(ring.NeedWakeup)
	}
	ready := false
	for _, q := range qs {
		if q.ready() {
			ready = true
			break
		}
	}
	g.iter.Unlock()
	// A change of the queues kicks the control word after our load of it,
	// so the wait returns at once rather than wait on a removed ring.
	if !ready {
		g.wait(words, vals)
	}
	g.iter.Lock()
	g.mu.Lock()
	qs = g.queues
	g.mu.Unlock()
	for _, q := range qs {
		q.r.ClearFlags(ring.NeedWakeup)
	}
	g.iter.Unlock()
}

// sleeperOf is the process's sleeper, started at the first sleep of a
// group: nil where the kernel has no io_uring futex wait (ENOSYS, EPERM
// from kernel.io_uring_disabled, Linux before 6.7), and the groups wait
// in futex_waitv(2), said once in the log.
var sleeperOf = sync.OnceValue(func() *sleeper.Sleeper {
	s, err := sleeper.New()
	if err != nil {
		slog.Info("engine: sleeping groups wait in futex_waitv(2), a thread each", "why", err.Error())
		return nil
	}
	return s
})

// sleeperFailed logs, once, that the sleeper stopped working.
var sleeperFailed sync.Once

// A sleep starts in the group's own thread, in futex_waitv(2), for
// directFor, if at most directMax groups are sleeping that way: a
// wake-up there is the kernel waking the thread, where one through the
// sleeper is a hand-off through its thread and the Go scheduler (several
// times the cost: core/sleeper's BenchmarkWakeSleeper against
// BenchmarkWakeFutexWaitv), so a conversation that pauses keeps its
// latency. A group idle for longer goes on sleeping in the sleeper,
// without a thread. The bound is the threads such sleeps can take, as
// the Go runtime keeps every thread it made.
const (
	directFor = 100 * time.Millisecond
	directMax = 4
)

// directSleeps is the number of groups sleeping in their own thread.
var directSleeps atomic.Int32

// wait is the group's sleep on words while they hold vals, for about
// sleepMax at most: first in its own thread (directFor), then in the
// process's sleeper, parked without its thread (the goroutine lets it go,
// as in unlocked); without a sleeper, in futex_waitv(2) throughout.
func (g *group) wait(words []*uint32, vals []uint32) {
	s := sleeperOf()
	if s == nil {
		ring.FutexWaitv(words, vals, sleepMax)
		return
	}
	if directSleeps.Add(1) <= directMax {
		_, err := ring.FutexWaitv(words, vals, directFor)
		directSleeps.Add(-1)
		if err != ring.ErrTimeout {
			return
		}
	} else {
		directSleeps.Add(-1)
	}
	var err error
	g.unlocked(func() { _, err = s.Wait(words, vals, sleepMax) })
	if err == nil || err == ring.ErrTimeout {
		return
	}
	sleeperFailed.Do(func() {
		slog.Info("engine: sleeping groups wait in futex_waitv(2), a thread each", "why", err.Error())
	})
	ring.FutexWaitv(words, vals, sleepMax)
}
