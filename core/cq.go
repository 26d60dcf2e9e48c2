package core

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/core/trace"
)

// CQ limits.
const (
	DefaultCQSize = 1024
	MaxCQSize     = 1 << 20
	// CQOverflowFactor: a CQ holds completions beyond its ring, up to this
	// many times its size but no more than CQOverflowMax, before it
	// reports FI_EOVERRUN (docs/abi.md).
	CQOverflowFactor = 16
	// CQOverflowMax bounds the completions held for one CQ (80 bytes
	// each), whatever its size: a client that does not read can make the
	// daemon hold at most about 5 MiB per CQ.
	CQOverflowMax = 1 << 16
)

// Draining held completions: the drain goroutine looks at the ring
// drainFirst after a completion did not fit, then backs off, doubling up to
// drainMax while the application frees nothing.
const (
	drainFirst = 200 * time.Microsecond
	drainMax   = 6400 * time.Microsecond
)

// CQEntry is one completion: fi_cq_tagged_entry plus fi_cq_err_entry, with
// the source address of fi_cq_readfrom. In the ring it is a ring.CQE.
type CQEntry struct {
	Context   uint64
	Flags     fi.CQFlags
	Len       uint64
	Buf       uint64
	Data      uint64
	Tag       uint64
	Src       uint64 // fi_addr of the sender, or fi.ADDR_NOTAVAIL
	Err       fi.Errno
	ProvErrno int
	OLen      uint64
	Desc      uint64 // the request's memory region, 0 for shell operations
	// Unknown is, with Err fi.EADDRNOTAVAIL (FI_SOURCE_ERR), the sender
	// the AV does not hold: the entry's err_data.
	Unknown fi.Addr
}

func (e CQEntry) cqe() ring.CQE {
	c := ring.CQE{Context: e.Context, Flags: uint64(e.Flags), Len: e.Len, Buf: e.Buf, Data: e.Data, Tag: e.Tag,
		SrcAddr: e.Src, Err: -int32(e.Err), ProvErrno: int32(e.ProvErrno), OLen: e.OLen, Desc: e.Desc}
	e.Unknown.PutSockaddr(c.ErrData[:])
	return c
}

func entryOf(c ring.CQE) CQEntry {
	e := CQEntry{Context: c.Context, Flags: fi.CQFlags(c.Flags), Len: c.Len, Buf: c.Buf, Data: c.Data, Tag: c.Tag,
		Src: c.SrcAddr, Err: fi.Errno(-c.Err), ProvErrno: int(c.ProvErrno), OLen: c.OLen, Desc: c.Desc}
	if e.Err == fi.EADDRNOTAVAIL {
		e.Unknown, _ = fi.SockaddrAddr(c.ErrData[:])
	}
	return e
}

// Record is the entry's facts: in cq/N/events the line
// "op_context=0x0 flags=FI_SEND|FI_MSG len=6 buf=0x0 data=0x0 tag=0x0",
// then src=FIADDR when known and err=FI_E... prov_errno=N olen=N for an
// error, and err_data=ADDRESS (the sender's, fi_sockaddr_in://...) for
// an FI_EADDRNOTAVAIL one; in events.json the same keys, every one
// present (src, err and err_data null when the line leaves them out).
func (e CQEntry) Record() Record {
	src := Field{Key: "src", Text: strconv.FormatUint(e.Src, 10), Hide: e.Src == uint64(fi.ADDR_NOTAVAIL)}
	if !src.Hide {
		src.JSON = e.Src
	}
	errName := Field{Key: "err", Text: e.Err.Name(), Hide: e.Err == 0}
	if e.Err != 0 {
		errName.JSON = e.Err.Name()
	}
	provErrno, olen := num("prov_errno", e.ProvErrno), num("olen", e.OLen)
	provErrno.Hide, olen.Hide = e.Err == 0, e.Err == 0
	errData := Field{Key: "err_data", Text: e.Unknown.String(), Hide: e.Err != fi.EADDRNOTAVAIL}
	if !errData.Hide {
		errData.JSON = e.Unknown.String()
	}
	return Record{hexNum("op_context", e.Context), flagField("flags", e.Flags.String()), num("len", e.Len),
		hexNum("buf", e.Buf), hexNum("data", e.Data), hexNum("tag", e.Tag), src, errName, provErrno, olen, errData}
}

// String is the entry's line in cq/N/events.
func (e CQEntry) String() string { return e.Record().String() }

// MarshalJSON is the entry's line in cq/N/events.json.
func (e CQEntry) MarshalJSON() ([]byte, error) { return e.Record().MarshalJSON() }

// FlagText turns fi_tostr's "[ FI_MSG, FI_SEND ]" into the one-word form
// "FI_MSG|FI_SEND" used inside status and event lines ("0" when empty).
func FlagText(s string) string {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if s == "" {
		return "0"
	}
	return strings.ReplaceAll(s, ", ", "|")
}

// CQ is a completion queue (fi_cq_open). Its storage is the completion ring
// of docs/abi.md, which applications map as cq/N/data; the daemon is its
// producer. The text view (events) and the wait file consume or watch the
// same ring, so an application uses either the ring or events, not both.
type CQ struct {
	obj *Object

	mu       sync.Mutex
	size     uint64
	format   fi.CQFormat
	bound    int          // endpoints bound; attributes are frozen while > 0
	opened   bool         // the ring was handed out; attributes are frozen
	shm      *ring.Region // nil until first needed
	r        *ring.Ring
	overflow []ring.CQE   // completions that did not fit the ring, in order
	draining bool         // a goroutine moves overflow into the ring
	overruns uint64       // lost completions the next FI_EOVERRUN entry reports
	promised uint64       // completions owed by operations that hold room (reserve)
	waiters  []*workQueue // rings reserve refused, woken when room may have come
	lost     uint64       // completions lost to overruns since the CQ was made (status)
	total    uint64
	errs     uint64        // error entries posted (stats)
	reads    uint64        // entries read through the events file (stats)
	signal   chan struct{} // closed and replaced when completions arrive, if a reader took it
	awaited  bool          // a blocked reader took signal since it was made
	signals  uint64        // fi_cq_signal calls, so a woken reader knows why
	closed   bool
}

func newCQ(o *Object) (Impl, error) {
	return &CQ{obj: o, size: DefaultCQSize, format: fi.CQ_FORMAT_TAGGED, signal: make(chan struct{})}, nil
}

// ringLocked makes the ring on first use; from then on its size is fixed.
func (c *CQ) ringLocked() (*ring.Ring, error) {
	if c.r != nil {
		return c.r, nil
	}
	if c.closed {
		return nil, Errorf(fi.ESHUTDOWN, "%s is closed", c.obj)
	}
	n, err := ring.RoundUp(c.size)
	if err != nil {
		return nil, Errorf(fi.EINVAL, "%s size %d: %v", c.obj, c.size, err)
	}
	shm, err := c.obj.Dom.fab.alloc(c.obj, "cq", ring.Size(n))
	if err != nil {
		return nil, err
	}
	r, err := ring.Init(shm.Mem, ring.TypeCompletion, n, ring.FeatFutex|ring.FeatWaitFile)
	if err != nil {
		shm.Close()
		return nil, Errorf(fi.EIO, "%s ring: %v", c.obj, err)
	}
	c.shm, c.r = shm, r
	return r, nil
}

// Region returns the ring's shared memory for cq/N/data; from then on the
// CQ's attributes are fixed.
func (c *CQ) Region() (*ring.Region, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.ringLocked(); err != nil {
		return nil, err
	}
	c.opened = true
	return c.shm, nil
}

// post adds a completion: into the ring, or behind it while the ring is
// full, or, past CQOverflowFactor times the size, as an overrun.
func (c *CQ) post(e CQEntry) {
	if e.Err != 0 && trace.On(trace.Error) {
		c.obj.tracef(trace.Error, "error entry %s", e)
	}
	c.mu.Lock()
	r, err := c.ringLocked()
	if err != nil {
		c.mu.Unlock()
		return
	}
	c.total++
	if e.Err != 0 {
		c.errs++
	}
	c.flushLocked()
	if len(c.overflow) == 0 {
		if slot, ok := r.Reserve(); ok {
			q := e.cqe()
			q.Encode(slot)
			r.Publish(1)
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
	}
	if uint64(len(c.overflow)) >= c.overflowMax() {
		c.overruns++
		c.lost++
	} else {
		c.overflow = append(c.overflow, e.cqe())
		r.SetFlags(ring.Overflow)
	}
	if !c.draining {
		c.draining = true
		go c.drain()
	}
	c.mu.Unlock()
}

// overflowMax is how many completions the CQ holds behind its ring;
// past them it loses completions (FI_EOVERRUN).
func (c *CQ) overflowMax() uint64 { return min(c.size*CQOverflowFactor, CQOverflowMax) }

// errCQFull is reserve's refusal: one value, as a ring waiting for room
// may be refused again at each wake.
var errCQFull = Errorf(fi.EAGAIN, "the CQ has no room for the operation's completion (FI_RM_ENABLED)")

// reserve holds room for the completion of one operation of an endpoint
// with resource management: fi_domain(3), "When RM is enabled, providers
// may use different mechanisms to prevent CQ overruns. This includes
// failing (returning -FI_EAGAIN) the posting of operations that could
// result in CQ overruns." The room is the ring and the completions held
// behind it (overflowMax); while the entries there and the completions
// already promised fill it, the operation is refused with fi.EAGAIN, and
// q, the ring it came from (nil: the shell), is woken once room may have
// come (wakeLocked): its request waits in the ring meanwhile. release
// gives the room back.
func (c *CQ) reserve(q *workQueue) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.ringLocked()
	if err != nil {
		return err
	}
	if uint64(r.Len())+uint64(len(c.overflow))+c.promised < uint64(r.Entries())+c.overflowMax() {
		c.promised++
		return nil
	}
	if q != nil && !slices.Contains(c.waiters, q) {
		c.waiters = append(c.waiters, q)
	}
	return errCQFull
}

// release gives back the room reserve held: the operation's completion
// is in the CQ now, or will never be.
func (c *CQ) release() {
	c.mu.Lock()
	c.promised--
	c.wakeLocked()
	c.mu.Unlock()
}

// wakeLocked wakes the rings reserve refused, as room may have come (a
// promise kept, entries read or moved into the ring); a ring still
// refused waits again.
func (c *CQ) wakeLocked() {
	for i, q := range c.waiters {
		q.unblock()
		c.waiters[i] = nil
	}
	c.waiters = c.waiters[:0]
}

// flushLocked moves held completions into the ring while it has room, and
// reports overruns once there is room for the error entry. It returns how
// many entries it published.
func (c *CQ) flushLocked() int {
	r := c.r
	n := 0
	for len(c.overflow) > 0 {
		slot, ok := r.Reserve()
		if !ok {
			break
		}
		c.overflow[0].Encode(slot)
		c.overflow = c.overflow[1:]
		r.Publish(1)
		n++
	}
	if len(c.overflow) == 0 && c.overruns > 0 {
		if slot, ok := r.Reserve(); ok {
			q := ring.CQE{Err: -int32(fi.EOVERRUN), OLen: c.overruns, SrcAddr: uint64(fi.ADDR_NOTAVAIL)}
			q.Encode(slot)
			r.Publish(1)
			c.overruns = 0
			n++
		}
	}
	if len(c.overflow) == 0 && c.overruns == 0 {
		c.overflow = nil
		if r.Flags()&ring.Overflow != 0 { // a load, not a locked write, per completion
			r.ClearFlags(ring.Overflow)
		}
	}
	if n > 0 {
		c.notifyLocked()
		c.wakeLocked()
	}
	return n
}

// drain moves held completions into the ring as the application frees
// entries; it runs only while there are some.
func (c *CQ) drain() {
	for wait := drainFirst; ; {
		time.Sleep(wait)
		c.mu.Lock()
		if c.closed {
			c.draining = false
			c.mu.Unlock()
			return
		}
		if c.flushLocked() > 0 {
			wait = drainFirst
		} else {
			wait = min(2*wait, drainMax)
		}
		if len(c.overflow) == 0 && c.overruns == 0 {
			c.draining = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// notifyLocked wakes the readers blocked in await. Without any, it does
// nothing: completions arrive for every message, and a channel made for
// each would be an allocation per message.
func (c *CQ) notifyLocked() {
	if !c.awaited {
		return
	}
	close(c.signal)
	c.signal, c.awaited = make(chan struct{}), false
}

// Read consumes up to max completions from the ring, in order, error
// entries inline. With block it waits for at least one (fi.EINTR when ctx
// ends); without, an empty queue gives fi.EAGAIN. A Signal wakes a blocked
// reader with nothing.
func (c *CQ) Read(ctx context.Context, max int, block bool) ([]CQEntry, error) {
	var out []CQEntry
	err := c.await(ctx, block, func(r *ring.Ring) bool {
		head, tail := r.Peek()
		for ; head != tail && len(out) < max; head++ {
			q, err := ring.DecodeCQE(r.Entry(head))
			if err != nil { // the application wrote into the ring; report, skip
				q = ring.CQE{Err: -int32(fi.EIO), SrcAddr: uint64(fi.ADDR_NOTAVAIL)}
			}
			out = append(out, entryOf(q))
		}
		r.Release(head)
		c.reads += uint64(len(out))
		return len(out) > 0
	})
	return out, err
}

// Wait blocks until the ring holds completions and returns how many: the
// cq/N/wait file, for applications without futexes. It consumes nothing.
func (c *CQ) Wait(ctx context.Context, block bool) (uint32, error) {
	var n uint32
	err := c.await(ctx, block, func(r *ring.Ring) bool {
		n = r.Len()
		return n > 0
	})
	return n, err
}

// await calls take with c.mu held, after moving held completions into the
// ring, until take reports success. Without block a failed take gives
// fi.EAGAIN; with block it sleeps until completions arrive, ctx ends
// (fi.EINTR), the CQ closes, or fi_cq_signal (nil, take having failed).
func (c *CQ) await(ctx context.Context, block bool, take func(*ring.Ring) bool) error {
	for {
		c.mu.Lock()
		r, err := c.ringLocked()
		if err != nil {
			c.mu.Unlock()
			return err
		}
		c.flushLocked()
		if take(r) {
			c.wakeLocked() // a read made room
			c.mu.Unlock()
			return nil
		}
		if !block {
			c.mu.Unlock()
			return Errorf(fi.EAGAIN, "no completions")
		}
		if c.closed {
			c.mu.Unlock()
			return Errorf(fi.ESHUTDOWN, "%s is closed", c.obj)
		}
		sig, seq := c.signal, c.signals
		c.awaited = true
		c.mu.Unlock()
		select {
		case <-sig:
		case <-ctx.Done():
			return Errorf(fi.EINTR, "interrupted")
		}
		c.mu.Lock()
		signalled := c.signals != seq
		c.mu.Unlock()
		if signalled {
			return nil
		}
	}
}

// Ready reports whether a read of cq/N/events or cq/N/wait would not
// block now (completions in the ring, or an error such as a closed CQ),
// and gives a channel closed when that may change: poll(2) on those files.
// It costs the data path nothing until someone polls: only then does a
// completion close a channel (notifyLocked).
func (c *CQ) Ready() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, err := c.ringLocked()
	if err != nil || c.closed {
		return true, nil
	}
	c.flushLocked()
	if r.Len() > 0 {
		return true, nil
	}
	c.awaited = true
	return false, c.signal
}

// Signal wakes blocked readers (fi_cq_signal); they return with nothing.
func (c *CQ) Signal() {
	c.mu.Lock()
	c.signals++
	c.notifyLocked()
	c.mu.Unlock()
}

func (c *CQ) bind() error {
	if err := c.obj.hold(); err != nil {
		return err
	}
	c.mu.Lock()
	_, err := c.ringLocked()
	if err == nil {
		c.bound++
	}
	c.mu.Unlock()
	if err != nil {
		c.obj.drop()
	}
	return err
}

func (c *CQ) unbind() {
	c.mu.Lock()
	c.bound--
	c.mu.Unlock()
	c.obj.drop()
}

func (c *CQ) Status() Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	queued := uint32(0)
	if c.r != nil {
		queued = c.r.Len()
	}
	return Record{num("size", c.size), num("queued", queued), num("overflow", len(c.overflow)), num("total", c.total),
		num("overruns", c.lost), num("bound", c.bound)}
}

func (c *CQ) frozen() error {
	if c.bound > 0 || c.opened || c.r != nil {
		return Errorf(fi.EBUSY, "%s is bound or mapped; set its attributes before", c.obj)
	}
	return nil
}

func (c *CQ) Attrs() []Attr {
	return []Attr{
		guarded(&c.mu, "size", c.frozen, func() string { return strconv.FormatUint(c.size, 10) }, func(s string) error {
			v, err := parseSize(s, 1, MaxCQSize)
			if err == nil {
				c.size = v
			}
			return err
		}),
		guarded(&c.mu, "format", c.frozen, func() string { return c.format.String() }, func(s string) error {
			v, err := fi.Parse[fi.CQFormat](s)
			if err != nil {
				return Errorf(fi.EINVAL, "%w", err)
			}
			c.format = v
			return nil
		}),
		{Name: "wait_obj", Get: func() string { return fi.WAIT_UNSPEC.String() }},
		{Name: "wait_cond", Get: func() string { return fi.CQ_COND_NONE.String() }},
		{Name: "signaling_vector", Get: func() string { return "0" }},
		{Name: "flags", Get: func() string { return "0" }},
		{Name: "mapping", Get: func() string { return c.obj.Dom.fab.Shm.Mode }},
	}
}

func (c *CQ) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.notifyLocked()
	if c.r != nil {
		c.r.SetFlags(ring.Dead)
		c.r.Wake()
		c.r = nil
		return c.shm.Close()
	}
	return nil
}

// parseSize parses a size attribute within [lo, hi].
func parseSize(s string, lo, hi uint64) (uint64, error) {
	v, err := ParseUint(strings.TrimSpace(s))
	if err != nil || v < lo || v > hi {
		return 0, Errorf(fi.EINVAL, "bad size %q: want a number from %d to %d", strings.TrimSpace(s), lo, hi)
	}
	return v, nil
}
