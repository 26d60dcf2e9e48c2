package ring

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// alignedMem is n zeroed bytes, 8-byte aligned like a mapping's start.
func alignedMem(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafeBytes(w)[:n]
}

func TestSizeRoundUp(t *testing.T) {
	if got := Size(64); got != 4096+64*128 {
		t.Errorf("Size(64) = %d", got)
	}
	for _, c := range []struct {
		n    uint64
		want uint32
	}{{0, 1}, {1, 1}, {2, 2}, {3, 4}, {64, 64}, {65, 128}, {1000, 1024}, {1 << 20, 1 << 20}} {
		got, err := RoundUp(c.n)
		if err != nil || got != c.want {
			t.Errorf("RoundUp(%d) = %d, %v; want %d", c.n, got, err, c.want)
		}
	}
	for _, n := range []uint64{1<<20 + 1, 1 << 32, 1<<64 - 1} {
		if _, err := RoundUp(n); err == nil {
			t.Errorf("RoundUp(%d) succeeded", n)
		}
	}
}

func TestInitHeader(t *testing.T) {
	mem := alignedMem(Size(8))
	for i := range mem {
		mem[i] = 0xee // Init must zero the header page
	}
	r, err := Init(mem, TypeCompletion, 8, FeatFutex|FeatWaitFile)
	if err != nil {
		t.Fatal(err)
	}
	ne := binary.NativeEndian
	// docs/abi.md, "Ring layout".
	for _, f := range []struct {
		off  int
		size int
		want uint64
	}{
		{0, 4, 0x47524646}, {4, 2, 1}, {6, 2, 2}, {8, 4, 128}, {12, 4, 8}, {16, 4, 7},
		{20, 4, 64}, {24, 4, 128}, {28, 4, 192}, {32, 4, 256}, {36, 4, 4096}, {40, 8, 3},
	} {
		var got uint64
		switch f.size {
		case 2:
			got = uint64(ne.Uint16(mem[f.off:]))
		case 4:
			got = uint64(ne.Uint32(mem[f.off:]))
		case 8:
			got = ne.Uint64(mem[f.off:])
		}
		if got != f.want {
			t.Errorf("header offset %d = %#x, want %#x", f.off, got, f.want)
		}
	}
	if string(mem[:4]) != "FFRG" {
		t.Errorf("magic bytes %q", mem[:4])
	}
	for i := 48; i < HeaderSize; i++ {
		if mem[i] != 0 {
			t.Fatalf("header byte %d = %#x after Init, want 0", i, mem[i])
		}
	}
	if mem[HeaderSize] != 0xee {
		t.Errorf("Init touched the entries")
	}
	if r.Type() != TypeCompletion || r.Entries() != 8 || r.Features() != FeatFutex|FeatWaitFile {
		t.Errorf("Type %d Entries %d Features %d", r.Type(), r.Entries(), r.Features())
	}
	if o, err := Open(mem); err != nil || o.Entries() != 8 || o.Type() != TypeCompletion {
		t.Errorf("Open after Init: %v", err)
	}
	// Entry i is at 4096 + (i & 7) * 128.
	for _, i := range []uint32{0, 1, 7, 8, 9, 1<<32 - 1} {
		e := r.Entry(i)
		off := int(uintptrOf(e) - uintptrOf(mem))
		if want := 4096 + int(i&7)*128; off != want || len(e) != 128 || cap(e) != 128 {
			t.Errorf("Entry(%d) at %d len %d cap %d, want at %d", i, off, len(e), cap(e), want)
		}
	}
}

func TestInitErrors(t *testing.T) {
	mem := alignedMem(Size(16))
	for _, c := range []struct {
		name    string
		mem     []byte
		typ     uint16
		entries uint32
	}{
		{"type 0", mem, 0, 16},
		{"type 3", mem, 3, 16},
		{"0 entries", mem, TypeWork, 0},
		{"3 entries", mem, TypeWork, 3},
		{"too many", alignedMem(Size(1 << 21)), TypeWork, 1 << 21},
		{"short", mem[:Size(16)-1], TypeWork, 16},
		{"unaligned", alignedMem(Size(4) + 2)[2:], TypeWork, 4},
	} {
		if _, err := Init(c.mem, c.typ, c.entries, 0); err == nil {
			t.Errorf("%s: Init succeeded", c.name)
		}
	}
}

func TestOpenCorrupt(t *testing.T) {
	const entries = 16
	u32 := func(off int, v uint32) func([]byte) {
		return func(m []byte) { binary.NativeEndian.PutUint32(m[off:], v) }
	}
	u16 := func(off int, v uint16) func([]byte) {
		return func(m []byte) { binary.NativeEndian.PutUint16(m[off:], v) }
	}
	cases := []struct {
		name    string
		corrupt func([]byte)
		size    int // memory length, if not Size(entries)
		field   string
	}{
		{"magic", u32(0, 0x46464752), 0, "magic"},
		{"magic zero", u32(0, 0), 0, "magic"},
		{"version 0", u16(4, 0), 0, "abi_version"},
		{"version 2", u16(4, 2), 0, "abi_version"},
		{"type 0", u16(6, 0), 0, "ring_type"},
		{"type 3", u16(6, 3), 0, "ring_type"},
		{"entry size 64", u32(8, 64), 0, "entry_size"},
		{"entry size 0", u32(8, 0), 0, "entry_size"},
		{"count 0", u32(12, 0), 0, "entry_count"},
		{"count 24", u32(12, 24), 0, "entry_count"},
		{"count 32, memory for 16", func(m []byte) { u32(12, 32)(m); u32(16, 31)(m) }, 0, "length"},
		{"count 1<<31", func(m []byte) { u32(12, 1<<31)(m); u32(16, 1<<31-1)(m) }, 0, "length"},
		{"mask", u32(16, 16), 0, "mask"},
		{"mask 0", u32(16, 0), 0, "mask"},
		{"head_off unaligned", u32(20, 66), 0, "head_off"},
		{"head_off in the fields", u32(20, 8), 0, "head_off"},
		{"head_off past the header", u32(20, 4096), 0, "head_off"},
		{"head_off huge", u32(20, 1<<32-4), 0, "head_off"},
		{"tail_off unaligned", u32(24, 129), 0, "tail_off"},
		{"tail_off in the fields", u32(24, 0), 0, "tail_off"},
		{"tail_off with head", u32(24, 68), 0, "tail_off"},
		{"tail_off past the header", u32(24, 4094), 0, "tail_off"},
		{"flags_off unaligned", u32(28, 195), 0, "flags_off"},
		{"flags_off in the fields", u32(28, 60), 0, "flags_off"},
		{"flags_off with tail", u32(28, 188), 0, "flags_off"},
		{"flags_off past the header", u32(28, 5000), 0, "flags_off"},
		{"wake_off unaligned", u32(32, 257), 0, "wake_off"},
		{"wake_off in the fields", u32(32, 32), 0, "wake_off"},
		{"wake_off with flags", u32(32, 196), 0, "wake_off"},
		{"wake_off with head", u32(32, 64), 0, "wake_off"},
		{"wake_off past the header", u32(32, 4096), 0, "wake_off"},
		{"entries_off unaligned", u32(36, 4100), 0, "entries_off"},
		{"entries_off 0", u32(36, 0), 0, "entries_off"},
		{"entries_off too small", u32(36, 256), 0, "entries_off"},
		{"entries_off past the memory", u32(36, 8192), 0, "length"},
		{"entries_off huge", u32(36, 1<<32-64), 0, "length"},
		{"reserved first", func(m []byte) { m[48] = 1 }, 0, "reserved"},
		{"reserved last", func(m []byte) { m[63] = 0x80 }, 0, "reserved"},
		{"short memory", nil, Size(entries) - 1, "length"},
		{"no header", nil, 63, "length"},
		{"empty", nil, -1, "length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := alignedMem(Size(entries))
			if _, err := Init(mem, TypeWork, entries, FeatFutex); err != nil {
				t.Fatal(err)
			}
			if c.corrupt != nil {
				c.corrupt(mem)
			}
			switch {
			case c.size < 0:
				mem = nil
			case c.size > 0:
				mem = mem[:c.size]
			}
			r, err := Open(mem)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Open = %v, %v; want a *FieldError for %s", r, err, c.field)
			}
			if fe.Field != c.field {
				t.Fatalf("error names %q, want %q: %v", fe.Field, c.field, err)
			}
			t.Log(err)
		})
	}
	// Unknown feature bits and other valid layouts are accepted.
	mem := alignedMem(Size(entries) + 4096)
	Init(mem, TypeWork, entries, 0)
	binary.NativeEndian.PutUint64(mem[40:], 1<<63|3)
	binary.NativeEndian.PutUint32(mem[20:], 1024) // head_off
	binary.NativeEndian.PutUint32(mem[32:], 4092) // wake_off, last word of the page
	binary.NativeEndian.PutUint32(mem[36:], 8192) // entries_off
	r, err := Open(mem)
	if err != nil {
		t.Fatalf("other layout: %v", err)
	}
	if r.Features() != 1<<63|3 {
		t.Errorf("features %#x", r.Features())
	}
	binary.NativeEndian.PutUint32(mem[1024:], 5)
	binary.NativeEndian.PutUint32(mem[128:], 7)
	if h, tl := r.Peek(); h != 5 || tl != 7 {
		t.Errorf("Peek = %d, %d; want the words at the header's offsets", h, tl)
	}
	if off := uintptrOf(r.Entry(1)) - uintptrOf(mem); off != 8192+128 {
		t.Errorf("Entry(1) at %d", off)
	}
	if uintptrOf(r.WakeWord()) != uintptrOf(mem[4092:]) {
		t.Errorf("WakeWord not at wake_off")
	}
}

func TestHeaderIgnoredAfterOpen(t *testing.T) {
	mem := alignedMem(Size(4))
	r, _ := Init(mem, TypeWork, 4, 0)
	clear(mem[:64]) // a hostile peer rewrites the header
	binary.NativeEndian.PutUint32(mem[TailOff:], 1<<31+3)
	if e := r.Entry(1<<31 + 3); uintptrOf(e)-uintptrOf(mem) != 4096+3*128 {
		t.Errorf("Entry does not use the validated mask")
	}
	if r.Free() != 0 {
		t.Errorf("Free = %d with tail-head beyond the size", r.Free())
	}
	if _, ok := r.Reserve(); ok {
		t.Errorf("Reserve succeeded with tail-head beyond the size")
	}
}

func TestFlagsAndReserve(t *testing.T) {
	mem := alignedMem(Size(2))
	r, _ := Init(mem, TypeWork, 2, FeatFutex)
	r.SetFlags(Overflow | Dead)
	r.SetFlags(NeedWakeup)
	r.ClearFlags(Dead)
	if f := r.Flags(); f != NeedWakeup|Overflow {
		t.Errorf("flags %#x", f)
	}
	if got := binary.NativeEndian.Uint32(mem[FlagsOff:]); got != NeedWakeup|Overflow {
		t.Errorf("flags word %#x", got)
	}
	for i := range 2 {
		if r.Free() != uint32(2-i) {
			t.Errorf("Free = %d before entry %d", r.Free(), i)
		}
		e, ok := r.Reserve()
		if !ok {
			t.Fatalf("Reserve %d failed", i)
		}
		e[0] = byte(i + 1)
		r.Publish(1) // NeedWakeup is set: wakes (nobody)
	}
	if _, ok := r.Reserve(); ok || r.Free() != 0 || r.Len() != 2 {
		t.Fatalf("full ring: Free %d Len %d", r.Free(), r.Len())
	}
	if w := *r.WakeWord(); w != 2 {
		t.Errorf("wake word %d after two publishes with NeedWakeup, want 2", w)
	}
	h, tl := r.Peek()
	if h != 0 || tl != 2 || r.Entry(0)[0] != 1 || r.Entry(1)[0] != 2 {
		t.Fatalf("Peek = %d, %d", h, tl)
	}
	r.Release(1)
	if r.Len() != 1 || r.Free() != 1 {
		t.Errorf("after Release(1): Len %d Free %d", r.Len(), r.Free())
	}
	r.ClearFlags(NeedWakeup)
	r.Publish(0)
	if w := *r.WakeWord(); w != 2 {
		t.Errorf("Publish woke without NeedWakeup")
	}
}

func TestSleep(t *testing.T) {
	mem := alignedMem(Size(4))
	r, _ := Init(mem, TypeCompletion, 4, FeatFutex)
	start := time.Now()
	if err := r.Sleep(nil, 30*time.Millisecond); err != ErrTimeout {
		t.Errorf("Sleep on an empty ring = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("Sleep returned after %v", d)
	}
	if r.Flags()&NeedWakeup != 0 {
		t.Errorf("NeedWakeup left set")
	}
	e, _ := r.Reserve()
	e[0] = 1
	r.Publish(1)
	if err := r.Sleep(nil, time.Hour); err != nil {
		t.Errorf("Sleep on a non-empty ring = %v", err)
	}
	r.Release(1)
	r.SetFlags(Dead)
	if err := r.Sleep(nil, time.Hour); err != nil {
		t.Errorf("Sleep on a dead ring = %v", err)
	}
	r.ClearFlags(Dead)

	// A producer in another goroutine wakes the sleeper.
	done := make(chan error)
	go func() { done <- r.Sleep(nil, 0) }()
	for r.Flags()&NeedWakeup == 0 {
		time.Sleep(time.Millisecond)
	}
	e, _ = r.Reserve()
	e[0] = 2
	r.Publish(1)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("woken Sleep = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish did not wake the sleeper")
	}

	// Close wakes too: Dead, then Wake.
	r.Release(2)
	go func() { done <- r.Sleep(nil, 0) }()
	for r.Flags()&NeedWakeup == 0 {
		time.Sleep(time.Millisecond)
	}
	r.SetFlags(Dead)
	r.Wake()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Dead and Wake did not wake the sleeper")
	}
}

// TestProducerConsumer pushes a million entries through a 64-entry ring in
// a memfd, with the indices starting just below 2^32 so they wrap, the
// producer in one goroutine and the consumer in another, which sleeps when
// the ring is empty.
func TestProducerConsumer(t *testing.T) {
	const (
		entries = 64
		total   = 1_000_000
		start   = 0xFFFFFF00
	)
	reg, err := NewMemfd("ring-test", Size(entries))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := Init(reg.Mem, TypeWork, entries, FeatFutex); err != nil {
		t.Fatal(err)
	}
	binary.NativeEndian.PutUint32(reg.Mem[HeadOff:], start)
	binary.NativeEndian.PutUint32(reg.Mem[TailOff:], start)
	// Each side opens its own view, as two processes would.
	prod, err := Open(reg.Mem)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := Open(reg.Mem)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var seq uint64
		for seq < total {
			_, tail := prod.Peek()
			n := prod.Free()
			if n == 0 {
				runtime.Gosched() // a full work ring: poll head
				continue
			}
			if left := total - seq; uint64(n) > left {
				n = uint32(left)
			}
			if seq%3 == 0 && n > 1 { // mix single publishes with batches
				n = 1
			}
			for i := range n {
				w := WR{Op: OpSend, Context: seq, Len: seq * 7, Tag: ^seq}
				w.Encode(prod.Entry(tail + i))
				seq++
			}
			prod.Publish(n)
		}
	}()

	var (
		seq    uint64
		sleeps int
		spins  int
	)
	deadline := time.Now().Add(60 * time.Second)
	for seq < total {
		head, tail := cons.Peek()
		if n := tail - head; n > entries {
			t.Fatalf("tail %#x - head %#x = %d > %d", tail, head, n, entries)
		}
		if head == tail {
			if spins++; spins < 100 {
				runtime.Gosched()
				continue
			}
			spins = 0
			sleeps++
			if err := cons.Sleep(func() bool { _, tl := cons.Peek(); return tl == head }, time.Second); err != nil && err != ErrTimeout {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("stuck at %d", seq)
			}
			continue
		}
		for ; head != tail; head++ {
			w, err := DecodeWR(cons.Entry(head))
			if err != nil {
				t.Fatalf("entry %d: %v", seq, err)
			}
			if w.Op != OpSend || w.Context != seq || w.Len != seq*7 || w.Tag != ^seq {
				t.Fatalf("entry %d (index %#x): got %+v", seq, head, w)
			}
			seq++
		}
		cons.Release(head)
	}
	wg.Wait()
	h, tl := cons.Peek()
	want := uint32(start)
	want += total // wraps
	if h != want || tl != want {
		t.Errorf("final head %#x tail %#x, want %#x (wrapped)", h, tl, want)
	}
	t.Logf("%d entries, %d sleeps, wake word %d", total, sleeps, *cons.WakeWord())
}

// TestReserveSeesConsumer: the producer's Reserve sees every entry the
// consumer (another view of the mapping, as in another process) frees,
// never more, and treats a head moved past tail as full.
func TestReserveSeesConsumer(t *testing.T) {
	mem := alignedMem(Size(4))
	p, _ := Init(mem, TypeCompletion, 4, 0)
	c, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	fill := func() int {
		n := 0
		for ; n < 10; n++ {
			if _, ok := p.Reserve(); !ok {
				break
			}
			p.Publish(1)
		}
		return n
	}
	if n := fill(); n != 4 {
		t.Fatalf("an empty ring of 4 took %d entries", n)
	}
	for round, free := range []uint32{1, 3, 2, 4} {
		head, _ := c.Peek()
		c.Release(head + free)
		if n := fill(); n != int(free) {
			t.Fatalf("round %d: the consumer freed %d entries, the producer filled %d", round, free, n)
		}
	}
	_, tail := c.Peek()
	c.Release(tail + 1) // a hostile consumer: head past tail
	if _, ok := p.Reserve(); ok {
		t.Fatal("Reserve succeeded with head past tail")
	}
}
