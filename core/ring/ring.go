package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"
)

// The ABI's constants (docs/abi.md). clients/c/fabricfs.h and
// clients/python/fabricfs.py carry copies, which this package's tests
// check against these.
const (
	Magic = 0x47524646 // "FFRG" in the first four bytes, little-endian
	// Version is abi_version, and the content of /abi_version: bumped on
	// any incompatible change of the tree or the ring ABI.
	Version = 1

	TypeWork       uint16 = 1 // work queue: the application produces, the daemon consumes
	TypeCompletion uint16 = 2 // completion queue: the daemon produces, the application consumes

	EntrySize  = 128  // bytes per entry
	HeaderSize = 4096 // the header page; entry 0 follows it

	// Offsets of the four shared words, each on its own cache line. Init
	// writes these; Open reads whatever the header says.
	HeadOff  = 64
	TailOff  = 128
	FlagsOff = 192
	WakeOff  = 256

	// Ring flags (the flags word).
	NeedWakeup uint32 = 1 // RING_NEED_WAKEUP: the consumer sleeps or is about to
	Overflow   uint32 = 2 // RING_OVERFLOW: the daemon holds completions that did not fit
	Dead       uint32 = 4 // RING_DEAD: the object is closed; nobody serves the ring

	// Feature bits (the header's features field).
	FeatFutex    uint64 = 1 // the wake word works with futexes
	FeatWaitFile uint64 = 2 // cq/N/wait exists
	FeatIOV      uint64 = 4 // work requests take the segment-array form (iov_count, rma_iov_count)

	// The segment-array form of a work request (docs/abi.md,
	// "Scatter-gather"): at most IOVLimit local and IOVLimit remote
	// segments, each SegSize bytes in the array.
	IOVLimit = 4
	SegSize  = 24

	// Work request operations (WR.Op).
	OpSend          uint8 = 1
	OpRecv          uint8 = 2
	OpTSend         uint8 = 3
	OpTRecv         uint8 = 4
	OpWrite         uint8 = 5
	OpRead          uint8 = 6
	OpAtomic        uint8 = 7
	OpFetchAtomic   uint8 = 8
	OpCompareAtomic uint8 = 9
)

// MaxEntries is the largest ring RoundUp and Init make (an addition to the
// brief: the bound RoundUp enforces, named so callers can quote it).
const MaxEntries = 1 << 20

// Byte offsets of the header fields (docs/abi.md, "Ring layout").
const (
	offMagic      = 0
	offVersion    = 4
	offType       = 6
	offEntrySize  = 8
	offCount      = 12
	offMask       = 16
	offHeadOff    = 20
	offTailOff    = 24
	offFlagsOff   = 28
	offWakeOff    = 32
	offEntriesOff = 36
	offFeatures   = 40
	offReserved   = 48
	fixedHeader   = 64 // the fields above end here; the first cache line
	cacheLine     = 64
)

var ne = binary.NativeEndian

// Size is the size in bytes of the file holding a ring of entries entries
// (laid out as Init lays it out).
func Size(entries uint32) int { return HeaderSize + int(entries)*EntrySize }

// RoundUp returns the ring size for a requested queue size n: the next
// power of two >= max(n, 1). Sizes above MaxEntries are an error.
func RoundUp(n uint64) (uint32, error) {
	if n > MaxEntries {
		return 0, fmt.Errorf("ring: %d entries is more than the maximum %d", n, MaxEntries)
	}
	if n <= 1 {
		return 1, nil
	}
	return 1 << bits.Len64(n-1), nil
}

// FieldError reports a header field or entry field that breaks the ABI. Open
// returns one for every header it rejects, DecodeWR and DecodeCQE for short
// buffers and non-zero reserved bytes.
type FieldError struct {
	In     string // "header", "work request" or "completion"
	Field  string // the field's name in docs/abi.md: "magic", "entry_count", "reserved"...
	Offset int    // the field's byte offset in the header or entry
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("ring: %s field %s (offset %d): %s", e.In, e.Field, e.Offset, e.Reason)
}

func headerError(field string, off int, format string, args ...any) error {
	return &FieldError{In: "header", Field: field, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// Ring is a view of one ring in a mapping: the header's values as validated
// by Init or Open, and pointers to the four shared words. It never reads the
// header again, so a peer that rewrites the header afterwards cannot make it
// index outside the mapping; indices are always masked.
//
// A Ring is safe for use by one producer and one consumer at a time (in any
// goroutines or processes); Flags, SetFlags, ClearFlags, Wake and the
// read-only methods may be used by anyone at any time. The mapping must stay
// mapped while the Ring is used.
type Ring struct {
	mem        []byte
	typ        uint16
	count      uint32
	mask       uint32
	features   uint64
	entriesOff uint64
	head       *uint32
	tail       *uint32
	flags      *uint32
	wake       *uint32
}

// Init writes a fresh header for a ring of typ (TypeWork or TypeCompletion)
// with entries entries (a power of two, at most MaxEntries) into mem, which
// must hold at least Size(entries) bytes and be 4-byte aligned (a mapping
// is page-aligned). It zeroes the whole header page, words included, and
// leaves the entries alone.
func Init(mem []byte, typ uint16, entries uint32, features uint64) (*Ring, error) {
	if typ != TypeWork && typ != TypeCompletion {
		return nil, fmt.Errorf("ring: type %d is neither TypeWork (1) nor TypeCompletion (2)", typ)
	}
	if entries == 0 || entries&(entries-1) != 0 || entries > MaxEntries {
		return nil, fmt.Errorf("ring: %d entries: want a power of two from 1 to %d", entries, MaxEntries)
	}
	if len(mem) < Size(entries) {
		return nil, fmt.Errorf("ring: %d bytes of memory, a ring of %d entries needs %d", len(mem), entries, Size(entries))
	}
	if err := checkAligned(mem); err != nil {
		return nil, err
	}
	clear(mem[:HeaderSize])
	ne.PutUint32(mem[offMagic:], Magic)
	ne.PutUint16(mem[offVersion:], Version)
	ne.PutUint16(mem[offType:], typ)
	ne.PutUint32(mem[offEntrySize:], EntrySize)
	ne.PutUint32(mem[offCount:], entries)
	ne.PutUint32(mem[offMask:], entries-1)
	ne.PutUint32(mem[offHeadOff:], HeadOff)
	ne.PutUint32(mem[offTailOff:], TailOff)
	ne.PutUint32(mem[offFlagsOff:], FlagsOff)
	ne.PutUint32(mem[offWakeOff:], WakeOff)
	ne.PutUint32(mem[offEntriesOff:], HeaderSize)
	ne.PutUint64(mem[offFeatures:], features)
	r := newRing(mem, typ, entries, features, HeadOff, TailOff, FlagsOff, WakeOff, HeaderSize)
	return r, nil
}

// Open validates the header at the start of mem and returns a view of the
// ring. It checks the magic, abi_version, ring_type (1 or 2), entry_size
// (128), entry_count (a non-zero power of two), mask (entry_count - 1), the
// reserved bytes (zero), the word offsets (4-aligned, each on its own
// 64-byte cache line, after the first line and before entries_off),
// entries_off (a multiple of 64, at least 320) and that mem holds every entry. Any failure
// is a *FieldError naming the field. Unknown feature bits are accepted: they
// only advertise. Open never panics, whatever the bytes.
func Open(mem []byte) (*Ring, error) {
	if len(mem) < fixedHeader {
		return nil, &FieldError{In: "header", Field: "length", Offset: 0,
			Reason: fmt.Sprintf("%d bytes, a header needs %d", len(mem), fixedHeader)}
	}
	if v := ne.Uint32(mem[offMagic:]); v != Magic {
		return nil, headerError("magic", offMagic, "%#x, want %#x", v, Magic)
	}
	if v := ne.Uint16(mem[offVersion:]); v != Version {
		return nil, headerError("abi_version", offVersion, "%d, want %d", v, Version)
	}
	typ := ne.Uint16(mem[offType:])
	if typ != TypeWork && typ != TypeCompletion {
		return nil, headerError("ring_type", offType, "%d, want %d (work) or %d (completion)", typ, TypeWork, TypeCompletion)
	}
	if v := ne.Uint32(mem[offEntrySize:]); v != EntrySize {
		return nil, headerError("entry_size", offEntrySize, "%d, want %d", v, EntrySize)
	}
	count := ne.Uint32(mem[offCount:])
	if count == 0 || count&(count-1) != 0 {
		return nil, headerError("entry_count", offCount, "%d is not a power of two", count)
	}
	if v := ne.Uint32(mem[offMask:]); v != count-1 {
		return nil, headerError("mask", offMask, "%#x, want entry_count-1 = %#x", v, count-1)
	}
	for i := offReserved; i < fixedHeader; i++ {
		if mem[i] != 0 {
			return nil, headerError("reserved", offReserved, "byte %d is %#x, want 0", i, mem[i])
		}
	}
	entriesOff := ne.Uint32(mem[offEntriesOff:])
	if entriesOff < 5*cacheLine || entriesOff%cacheLine != 0 {
		return nil, headerError("entries_off", offEntriesOff, "%d: want a multiple of %d, at least %d (the header fields and four words)", entriesOff, cacheLine, 5*cacheLine)
	}
	words := [4]struct {
		name string
		off  int
		val  uint32
	}{
		{"head_off", offHeadOff, 0},
		{"tail_off", offTailOff, 0},
		{"flags_off", offFlagsOff, 0},
		{"wake_off", offWakeOff, 0},
	}
	for i := range words {
		w := &words[i]
		w.val = ne.Uint32(mem[w.off:])
		switch {
		case w.val%4 != 0:
			return nil, headerError(w.name, w.off, "%d is not 4-byte aligned", w.val)
		case w.val < fixedHeader:
			return nil, headerError(w.name, w.off, "%d overlaps the header fields (bytes 0-63)", w.val)
		case uint64(w.val)+4 > uint64(entriesOff):
			return nil, headerError(w.name, w.off, "%d is not before entries_off %d", w.val, entriesOff)
		}
		for _, p := range words[:i] {
			if p.val/cacheLine == w.val/cacheLine {
				return nil, headerError(w.name, w.off, "%d shares a cache line with %s %d", w.val, p.name, p.val)
			}
		}
	}
	need := uint64(entriesOff) + uint64(count)*EntrySize
	if uint64(len(mem)) < need {
		return nil, &FieldError{In: "header", Field: "length", Offset: 0,
			Reason: fmt.Sprintf("%d bytes of memory, entries_off %d + %d entries of %d bytes need %d", len(mem), entriesOff, count, EntrySize, need)}
	}
	if err := checkAligned(mem); err != nil {
		return nil, err
	}
	features := ne.Uint64(mem[offFeatures:])
	return newRing(mem, typ, count, features, words[0].val, words[1].val, words[2].val, words[3].val, entriesOff), nil
}

func checkAligned(mem []byte) error {
	if uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%4 != 0 {
		return errors.New("ring: memory is not 4-byte aligned")
	}
	return nil
}

func newRing(mem []byte, typ uint16, count uint32, features uint64, head, tail, flags, wake, entries uint32) *Ring {
	word := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	return &Ring{
		mem: mem, typ: typ, count: count, mask: count - 1, features: features, entriesOff: uint64(entries),
		head: word(head), tail: word(tail), flags: word(flags), wake: word(wake),
	}
}

// Type is the ring's type: TypeWork or TypeCompletion.
func (r *Ring) Type() uint16 { return r.typ }

// Entries is the number of entries (entry_count).
func (r *Ring) Entries() uint32 { return r.count }

// Features is the header's feature bits (FeatFutex, FeatWaitFile), as read
// by Init or Open. (An addition to the brief.)
func (r *Ring) Features() uint64 { return r.features }

// Entry returns the EntrySize bytes of entry i, a free-running index (it is
// masked). The slice aliases the shared mapping.
func (r *Ring) Entry(i uint32) []byte {
	off := r.entriesOff + uint64(i&r.mask)*EntrySize
	return r.mem[off : off+EntrySize : off+EntrySize]
}

// Reserve returns the entry at tail for the producer to fill, or false if
// the ring is full (tail - head >= entry_count; a value above entry_count
// means the consumer broke the indices, and is treated as full). Reserve
// does not move tail: fill the entry and call Publish(1). To fill several
// entries before one Publish, use Free and Peek's tail: entries tail,
// tail+1, ... tail+Free()-1 are the producer's.
func (r *Ring) Reserve() ([]byte, bool) {
	t := atomic.LoadUint32(r.tail)
	h := atomic.LoadUint32(r.head)
	if t-h >= r.count {
		return nil, false
	}
	return r.Entry(t), true
}

// Free is the number of entries the producer may fill: entry_count -
// (tail - head), or 0 if the indices say full or worse. (An addition to the
// brief, for producers that publish in batches.)
func (r *Ring) Free() uint32 {
	t := atomic.LoadUint32(r.tail)
	h := atomic.LoadUint32(r.head)
	if t-h >= r.count {
		return 0
	}
	return r.count - (t - h)
}

// Publish makes the next n entries visible to the consumer: a store-release
// of tail + n; then, after a full fence, if the consumer set NeedWakeup, it
// wakes it (Wake). With Go's sequentially consistent atomics the store of
// tail and the following load of flags are never reordered, which is the
// fence the sleep protocol needs. Only the producer may call Publish.
func (r *Ring) Publish(n uint32) {
	t := atomic.LoadUint32(r.tail) // relaxed in the ABI: only we write it
	atomic.StoreUint32(r.tail, t+n)
	if atomic.LoadUint32(r.flags)&NeedWakeup != 0 {
		r.Wake()
	}
}

// Peek returns head (the consumer's own index) and tail (loaded with acquire
// semantics: the entries before it are published and readable). The
// consumer takes entries head, head+1, ... up to tail and then calls
// Release. tail - head above Entries() means the producer broke the indices;
// a careful consumer (the daemon) takes at most Entries() entries per pass.
func (r *Ring) Peek() (head, tail uint32) {
	head = atomic.LoadUint32(r.head)
	tail = atomic.LoadUint32(r.tail)
	return head, tail
}

// Tail loads tail with acquire semantics, for a consumer that keeps its
// own copy of head (as the daemon does, so that a producer writing head
// cannot make it take entries again).
func (r *Ring) Tail() uint32 { return atomic.LoadUint32(r.tail) }

// Release stores head with release semantics: the entries before it are
// consumed and the producer may reuse them. It wakes nobody: a producer
// waiting for space in a work ring polls head or retries after completions,
// and the daemon, which produces completion rings, moves held completions
// in on its own schedule (docs/abi.md, "Full rings").
func (r *Ring) Release(head uint32) { atomic.StoreUint32(r.head, head) }

// Len is the number of published, unconsumed entries: tail - head.
func (r *Ring) Len() uint32 {
	h := atomic.LoadUint32(r.head)
	t := atomic.LoadUint32(r.tail)
	return t - h
}

// Flags is the flags word: NeedWakeup, Overflow, Dead.
func (r *Ring) Flags() uint32 { return atomic.LoadUint32(r.flags) }

// SetFlags sets bits in the flags word (an atomic or).
func (r *Ring) SetFlags(bits uint32) { atomic.OrUint32(r.flags, bits) }

// ClearFlags clears bits in the flags word (an atomic and-not).
func (r *Ring) ClearFlags(bits uint32) { atomic.AndUint32(r.flags, ^bits) }

// WakeWord is the futex word of the ring, in the shared mapping.
func (r *Ring) WakeWord() *uint32 { return r.wake }

// Wake wakes every thread sleeping on the ring's wake word, in any process:
// it adds 1 to the word, then FUTEX_WAKE (the shared operation, not
// FUTEX_PRIVATE). The daemon closing an object calls SetFlags(Dead) and then
// Wake, so that sleepers notice.
func (r *Ring) Wake() {
	atomic.AddUint32(r.wake, 1)
	_ = FutexWake(r.wake) // fails only for a bad address, which a Ring never has
}

// Sleep is the consumer's sleep of docs/abi.md: it loads the wake word, sets
// NeedWakeup, and (the set being a sequentially consistent read-modify-write,
// a full fence) then asks empty whether there is still nothing to take; if
// so it waits on the wake word until a producer's Publish (or Wake) changes
// it, or timeout passes (timeout <= 0 waits without a limit). It clears
// NeedWakeup before returning. A nil empty means "Len() == 0 and Dead is
// not set". Sleep returns nil after a wake-up, a spurious wake-up or when
// empty said no, ErrTimeout when the time ran out; the caller re-checks the
// ring either way. Only the consumer may call Sleep.
func (r *Ring) Sleep(empty func() bool, timeout time.Duration) error {
	if empty == nil {
		empty = func() bool { return r.Len() == 0 && r.Flags()&Dead == 0 }
	}
	w := atomic.LoadUint32(r.wake)
	r.SetFlags(NeedWakeup)
	var err error
	if empty() {
		err = FutexWait(r.wake, w, timeout)
	}
	r.ClearFlags(NeedWakeup)
	return err
}
