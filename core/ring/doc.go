// Package ring implements the fabricfs shared-memory ring ABI of
// docs/abi.md (abi_version 1): the single-producer, single-consumer rings
// through which an application and the daemon exchange work requests and
// completions without a system call per message.
//
// # Who uses it
//
// Both sides of the ABI: the daemon (package core) creates the rings (Init,
// over a Region from NewMemfd), consumes the work queues ep/N/tx
// and ep/N/rx and produces into the completion queues cq/N/data; the Go
// client (clients/go/fabricfs) maps the same files (MapFile, then Open) and
// plays the other roles. The C and Python clients carry their own copies of
// the layout, which the tests of this package check against it. The package depends on nothing of fabricfs, so a client need not
// link the daemon. It is Linux-only (memfd, futexes).
//
// # Layout
//
// A ring file is a 4096-byte header page followed by entry_count entries of
// 128 bytes, entry_count a power of two. The header's first 64 bytes
// describe the ring (magic "FFRG", abi_version, ring_type, entry_size,
// entry_count, mask, the offsets of four words and of entry 0, feature
// bits, 16 reserved zero bytes); then come the four shared u32 words, each
// on its own cache line: head (64), tail (128), flags (192) and wake (256).
// Init writes exactly that layout; Open accepts any header that is safe to
// use (the words aligned, on distinct cache lines, inside the header) and
// checks every field, reporting a broken one as a *FieldError that names
// it. A Ring keeps the values it validated and never reads the header
// again, so a peer that scribbles on the header cannot make it index
// outside the mapping. Indices run free and wrap at 2^32: entry i is at
// entries_off + (i & mask) * 128, and the ring holds tail - head entries.
// Entries are encoded by WR.Encode and CQE.Encode and decoded by DecodeWR
// and DecodeCQE, in native byte order, reserved bytes zero.
//
// # Ordering
//
// The words are accessed with sync/atomic on *uint32 pointers into the
// mapping. Go's atomic operations are sequentially consistent (the Go
// memory model: they behave like C's seq_cst atomics), which is at least as
// strong as every ordering docs/abi.md asks for: a load is an acquire, a
// store a release, and a store followed by a load of another word is never
// reordered, which is the full fence of the protocol. So the producer fills
// an entry with plain writes and publishes it with Publish (a release store
// of tail); the consumer loads tail in Peek (an acquire), reads the entries
// before it, and hands them back with Release (a release store of head).
// Only the producer writes tail and only the consumer writes head; flags
// are changed with atomic or/and (SetFlags, ClearFlags) since both sides
// and the daemon's bookkeeping (Overflow, Dead) share that word.
//
// # Wake-ups
//
// A consumer that finds nothing to do may sleep without losing a wake-up:
// Sleep loads the wake word, sets NeedWakeup, re-checks that the ring is
// still empty (the set is a sequentially consistent read-modify-write, so
// it is the fence), and only then FUTEX_WAITs on the wake word for the
// value it loaded, clearing NeedWakeup afterwards. Publish stores tail and
// then loads flags; if NeedWakeup is set it calls Wake, which increments
// the wake word and FUTEX_WAKEs all its waiters. Either the producer sees
// the flag, or the consumer sees the new tail: the two fences pair, and a
// wake-up that comes between the consumer's check and its wait changes the
// word, so the wait returns at once. The futex operations are the shared
// ones (not FUTEX_PRIVATE): the word is in a page mapped by several
// processes, and the kernel keys it by the file and offset, not by the
// address. The daemon sleeps on many rings at once with FutexWaitv
// (futex_waitv(2)), setting NeedWakeup on each. Nothing wakes a producer
// waiting for space: it polls head (docs/abi.md, "Full rings"). When an
// object is closed the daemon sets Dead and calls Wake, so a sleeping
// consumer looks again.
//
// # Memory
//
// A Region is a file mapped MAP_SHARED: a sealed memfd (NewMemfd) that the
// daemon serves with FUSE passthrough or links to as /proc/PID/fd/N.
// Clients use MapFile on the ring file's path either way. MapPieces maps
// pages of several such files side by side as one range (a memory region
// made of windows of others).
package ring
