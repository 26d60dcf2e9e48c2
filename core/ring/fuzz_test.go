package ring

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzOpen feeds Open arbitrary header bytes in memory of arbitrary length
// (seeds in testdata/fuzz/FuzzOpen). Open must never panic; when it accepts
// a header, every method must stay inside the memory.
func FuzzOpen(f *testing.F) {
	f.Fuzz(func(t *testing.T, header []byte, size uint32) {
		n := int(size % (1 << 18))
		n = max(n, len(header))
		mem := alignedMem(n)
		copy(mem, header)
		if _, err := Open(mem[min(1, len(mem)):]); err == nil { // never aligned
			t.Fatal("Open accepted unaligned memory")
		}
		r, err := Open(mem)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("Open error %v is not a *FieldError", err)
			}
			return
		}
		c := r.Entries()
		if c == 0 || c&(c-1) != 0 || (r.Type() != TypeWork && r.Type() != TypeCompletion) {
			t.Fatalf("accepted entries %d type %d", c, r.Type())
		}
		for _, i := range []uint32{0, c - 1, c, 1<<32 - 1} {
			if e := r.Entry(i); len(e) != EntrySize {
				t.Fatalf("Entry(%d) has %d bytes", i, len(e))
			}
		}
		for _, p := range []*uint32{r.head, r.tail, r.flags, r.wake} {
			off := uintptrOf(p) - uintptrOf(mem)
			if off < 64 || uint64(off)+4 > r.entriesOff || off%4 != 0 {
				t.Fatalf("word at %d", off)
			}
		}
		r.Peek()
		r.Len()
		r.Free()
		r.SetFlags(Overflow)
		r.ClearFlags(Overflow)
		if e, ok := r.Reserve(); ok {
			(&CQE{Context: 1}).Encode(e)
			r.Publish(1)
		}
	})
}

// FuzzDecodeWR decodes arbitrary bytes as a work request (seeds in
// testdata/fuzz/FuzzDecodeWR): no panic, an error exactly when the buffer
// is short or a reserved byte is set, and encoding the result gives the
// bytes back with the reserved ones zeroed.
func FuzzDecodeWR(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := DecodeWR(b)
		if len(b) < EntrySize {
			if err == nil {
				t.Fatalf("%d bytes decoded", len(b))
			}
			return
		}
		want := bytes.Clone(b[:EntrySize])
		clear(want[3:8])
		clear(want[122:128])
		reserved := !bytes.Equal(want, b[:EntrySize])
		if (err != nil) != reserved {
			t.Fatalf("reserved bytes set %v, error %v", reserved, err)
		}
		got := make([]byte, EntrySize)
		w.Encode(got)
		if !bytes.Equal(got, want) {
			t.Fatalf("re-encoded\n%x\nwant\n%x", got, want)
		}
	})
}

// FuzzDecodeCQE is FuzzDecodeWR for completions (seeds in
// testdata/fuzz/FuzzDecodeCQE).
func FuzzDecodeCQE(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCQE(b)
		if len(b) < EntrySize {
			if err == nil {
				t.Fatalf("%d bytes decoded", len(b))
			}
			return
		}
		want := bytes.Clone(b[:EntrySize])
		clear(want[80:128])
		reserved := !bytes.Equal(want, b[:EntrySize])
		if (err != nil) != reserved {
			t.Fatalf("reserved bytes set %v, error %v", reserved, err)
		}
		got := make([]byte, EntrySize)
		c.Encode(got)
		if !bytes.Equal(got, want) {
			t.Fatalf("re-encoded\n%x\nwant\n%x", got, want)
		}
	})
}

// FuzzDecodeSegs decodes arbitrary bytes as a segment array of every
// split into local and remote segments up to IOVLimit each: no panic, an
// error exactly when the length is not the array's, and encoding the
// result gives the bytes back.
func FuzzDecodeSegs(f *testing.F) {
	f.Add(make([]byte, 2*SegSize))
	f.Add(make([]byte, 8*SegSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		for n := 0; n <= IOVLimit; n++ {
			for m := 0; m <= IOVLimit; m++ {
				local, remote := make([]Seg, n), make([]RMASeg, m)
				err := DecodeSegs(b, local, remote)
				if fits := len(b) == (n+m)*SegSize; (err == nil) != fits {
					t.Fatalf("%d bytes as %d+%d segments: error %v", len(b), n, m, err)
				}
				if err != nil {
					continue
				}
				got := make([]byte, len(b))
				EncodeSegs(got, local, remote)
				if !bytes.Equal(got, b) {
					t.Fatalf("re-encoded\n%x\nwant\n%x", got, b)
				}
			}
		}
	})
}
