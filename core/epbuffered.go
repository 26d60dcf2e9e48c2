package core

// The bytes of buffered receives (FI_BUFFERED_RECV): fi_msg(3), "The CQ
// entry's `buf' will point to a provider managed buffer where the start
// of the received message is located, and `len' will be set to the total
// size of the message."

import (
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// BufferedSlots is how many reported messages an endpoint with
// FI_BUFFERED_RECV shows the bytes of at once; a further report waits
// until the application claims or discards one of them.
const BufferedSlots = 64

// bufferedSlotMax bounds a slot, whatever FI_OPT_BUFFERED_LIMIT a
// provider allows: no provider holds more of a message when it reports
// it (rxm: an eager message, 16 KiB), and the area is BufferedSlots of
// them.
const bufferedSlotMax = 1 << 20

// bufferedArea is where an endpoint with FI_BUFFERED_RECV shows the first
// bytes of the messages it reports: shared memory the application maps as
// ep/N/buffered, in BufferedSlots slots of FI_OPT_BUFFERED_LIMIT bytes
// (slots of no bytes, and no memory, with a limit of 0)
// (its value at enable: "Any adjustments must be made prior to enabling
// the endpoint"), one per reported message until a claim or a discard
// takes it ("Once a buffered receive has been claimed or discarded, the
// original CQ entry `buf' or struct fi_recv_context data may no longer be
// accessed by the application"). A report that finds no free slot waits,
// and the reports behind it with it, so that they reach the CQ in the
// order the messages came.
type bufferedArea struct {
	mu      sync.Mutex
	shm     *ring.Region // nil with a limit of 0: no bytes are shown, the slots only count
	slot    uint64       // bytes per slot: FI_OPT_BUFFERED_LIMIT
	free    []uint64     // free slots, by number
	byKey   map[uint64]uint64
	waiting []bufferedReport
	closed  bool
}

// bufferedReport is a report waiting for a slot, with its bytes and
// where it goes.
type bufferedReport struct {
	c     Completion
	bytes []byte
	cq    *CQ
	src   uint64
}

// newBufferedArea makes the area of endpoint o for messages shown up to
// limit bytes, charging its memory to o's owner.
func newBufferedArea(o *Object, limit uint64) (*bufferedArea, error) {
	b := &bufferedArea{slot: min(limit, bufferedSlotMax), byKey: map[uint64]uint64{}}
	for i := uint64(BufferedSlots); i > 0; i-- {
		b.free = append(b.free, i-1) // slot 0 first
	}
	if b.slot > 0 {
		shm, err := o.Dom.fab.alloc(o, "buffered", int(b.slot*BufferedSlots))
		if err != nil {
			return nil, err
		}
		b.shm = shm
	}
	return b, nil
}

// report shows the message of the provider's report c (bytes: its first
// bytes the provider holds) in a slot and posts
// its entry on cq with sender src, or has it wait for a slot. The entry is
// the report's as the page describes it: op_context the claim key, buf
// the offset of its slot in ep/N/buffered, with the message's first bytes
// (at most the limit: "The maximum sized message that a provider can
// buffer is limited by an FI_OPT_BUFFERED_LIMIT"), len the message's
// size, FI_MORE when the slot holds less than the message ("If the sent
// message is larger than the buffered amount, the CQ entry `flags' will
// have the FI_MORE bit set"), and desc the endpoint's desc (ep/N/attr/desc),
// which names the endpoint a report on a shared CQ came from.
func (b *bufferedArea) report(c Completion, bytes []byte, cq *CQ, src, desc uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	r := bufferedReport{c: c, bytes: bytes, cq: cq, src: src}
	if len(b.waiting) > 0 || !b.showLocked(r, desc) {
		b.waiting = append(b.waiting, r)
	}
}

// showLocked puts r's bytes into a free slot and posts its entry; false:
// no slot is free.
func (b *bufferedArea) showLocked(r bufferedReport, desc uint64) bool {
	c := r.c
	if len(b.free) == 0 {
		return false
	}
	s := b.free[len(b.free)-1]
	b.free = b.free[:len(b.free)-1]
	b.byKey[c.Key] = s
	off, shown := s*b.slot, uint64(0)
	if b.shm != nil {
		shown = uint64(copy(b.shm.Mem[off:off+b.slot], r.bytes))
	}
	flags := c.Flags &^ fi.CQFlags(fi.MORE)
	if c.Len > shown {
		flags |= fi.CQFlags(fi.MORE)
	}
	r.cq.post(CQEntry{Context: c.Key, Flags: flags, Len: c.Len, Buf: off, Data: c.Data, Tag: c.Tag, Src: r.src, Desc: desc})
	return true
}

// taken frees the slot of the message of claim key key, which a claim or
// a discard took, and shows the reports that waited for it.
func (b *bufferedArea) taken(key, desc uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.byKey[key]
	if !ok {
		return
	}
	delete(b.byKey, key)
	b.free = append(b.free, s)
	for len(b.waiting) > 0 && !b.closed && b.showLocked(b.waiting[0], desc) {
		b.waiting[0] = bufferedReport{}
		b.waiting = b.waiting[1:]
	}
}

// bufferedArea is the endpoint's area, nil without FI_BUFFERED_RECV or
// before enable.
func (e *EP) bufferedArea() *bufferedArea {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.buffered
}

// Buffered returns the memory of ep/N/buffered: where the reports of an
// enabled endpoint with FI_BUFFERED_RECV show the messages' first bytes
// (bufferedArea).
func (e *EP) Buffered() (*ring.Region, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.state == stateClosed:
		return nil, gone(e.obj)
	case e.info.Mode&fi.BUFFERED_RECV == 0:
		return nil, Errorf(fi.EOPNOTSUPP, "the endpoint's mode lacks FI_BUFFERED_RECV")
	case e.buffered == nil:
		return nil, Errorf(fi.EOPBADSTATE, "endpoint is %s; its buffered area exists once it is enabled", stateText(e.state))
	case e.buffered.shm == nil:
		return nil, Errorf(fi.ENODATA, "FI_OPT_BUFFERED_LIMIT is 0: reports show no bytes")
	}
	return e.buffered.shm, nil
}

// close gives the area's memory back; reports from then on are dropped.
func (b *bufferedArea) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.waiting = nil
	if b.shm != nil {
		b.shm.Close()
	}
}
