package ring

import (
	"encoding/binary"
	"errors"
	"testing"
)

// field is one row of docs/abi.md's entry tables.
type field struct {
	name string
	off  int
	size int // 1, 4 or 8
	val  uint64
}

func checkFields(t *testing.T, b []byte, fields []field) {
	t.Helper()
	ne := binary.NativeEndian
	for _, f := range fields {
		var got uint64
		switch f.size {
		case 1:
			got = uint64(b[f.off])
		case 4:
			got = uint64(ne.Uint32(b[f.off:]))
		case 8:
			got = ne.Uint64(b[f.off:])
		}
		if got != f.val {
			t.Errorf("%s at offset %d = %#x, want %#x", f.name, f.off, got, f.val)
		}
	}
}

func checkZero(t *testing.T, b []byte, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if b[i] != 0 {
			t.Errorf("reserved byte %d = %#x, want 0", i, b[i])
		}
	}
}

func sampleWR() WR {
	return WR{
		Op: OpCompareAtomic, Flags: 1<<24 | 1<<17, Context: 0x1111111111111111, Desc: 0x2222222222222222,
		Offset: 0x3333333333333333, Len: 0x4444444444444444, Addr: 0x5555555555555555, Data: 0x6666666666666666,
		Tag: 0x7777777777777777, Ignore: 0x8888888888888888, RMAAddr: 0x9999999999999999, RMAKey: 0xaaaaaaaaaaaaaaaa,
		ResultDesc: 0xbbbbbbbbbbbbbbbb, ResultOffset: 0xcccccccccccccccc, CompareOffset: 0xdddddddddddddddd,
		Datatype: 0xee, AtomicOp: 0xf1, IOVCount: 0x12, RMAIOVCount: 0x34,
	}
}

func TestWRLayout(t *testing.T) {
	w := sampleWR()
	b := make([]byte, EntrySize)
	for i := range b {
		b[i] = 0xff // Encode must zero the reserved bytes
	}
	w.Encode(b)
	// docs/abi.md, "Work request (128 bytes)".
	checkFields(t, b, []field{
		{"op", 0, 1, 9},
		{"iov_count", 1, 1, 0x12},
		{"rma_iov_count", 2, 1, 0x34},
		{"flags", 8, 8, 1<<24 | 1<<17},
		{"context", 16, 8, 0x1111111111111111},
		{"desc", 24, 8, 0x2222222222222222},
		{"offset", 32, 8, 0x3333333333333333},
		{"len", 40, 8, 0x4444444444444444},
		{"addr", 48, 8, 0x5555555555555555},
		{"data", 56, 8, 0x6666666666666666},
		{"tag", 64, 8, 0x7777777777777777},
		{"ignore", 72, 8, 0x8888888888888888},
		{"rma_addr", 80, 8, 0x9999999999999999},
		{"rma_key", 88, 8, 0xaaaaaaaaaaaaaaaa},
		{"result_desc", 96, 8, 0xbbbbbbbbbbbbbbbb},
		{"result_offset", 104, 8, 0xcccccccccccccccc},
		{"compare_offset", 112, 8, 0xdddddddddddddddd},
		{"datatype", 120, 1, 0xee},
		{"atomic_op", 121, 1, 0xf1},
	})
	checkZero(t, b, 3, 8)
	checkZero(t, b, 122, 128)

	got, err := DecodeWR(b)
	if err != nil || got != w {
		t.Errorf("DecodeWR = %+v, %v; want %+v", got, err, w)
	}
	// Every field is independent: a zero WR with one field set encodes to
	// that field only.
	var z WR
	z.Len = 5
	z.Encode(b)
	for i, c := range b {
		want := byte(0)
		if i == 40 {
			want = 5
		}
		if c != want {
			t.Errorf("byte %d = %d, want %d", i, c, want)
		}
	}
	// Longer buffers are fine; only the first 128 bytes count.
	long := make([]byte, 200)
	w.Encode(long)
	if got, err := DecodeWR(long); err != nil || got != w {
		t.Errorf("DecodeWR of a long buffer = %+v, %v", got, err)
	}
}

// TestSegs checks the segment array's layout (docs/abi.md,
// "Scatter-gather"): 24-byte segments, local then remote, and that
// DecodeSegs gives back what EncodeSegs wrote and refuses a wrong length.
func TestSegs(t *testing.T) {
	local := []Seg{{1, 2, 3}, {4, 5, 6}}
	remote := []RMASeg{{7, 8, 9}}
	b := make([]byte, 3*SegSize)
	EncodeSegs(b, local, remote)
	checkFields(t, b, []field{
		{"iov[0].desc", 0, 8, 1}, {"iov[0].offset", 8, 8, 2}, {"iov[0].len", 16, 8, 3},
		{"iov[1].desc", 24, 8, 4}, {"iov[1].offset", 32, 8, 5}, {"iov[1].len", 40, 8, 6},
		{"rma_iov[0].addr", 48, 8, 7}, {"rma_iov[0].len", 56, 8, 8}, {"rma_iov[0].key", 64, 8, 9},
	})
	gl, gr := make([]Seg, 2), make([]RMASeg, 1)
	if err := DecodeSegs(b, gl, gr); err != nil || gl[0] != local[0] || gl[1] != local[1] || gr[0] != remote[0] {
		t.Errorf("DecodeSegs = %v %v, %v", gl, gr, err)
	}
	var fe *FieldError
	if err := DecodeSegs(b[:len(b)-1], gl, gr); !errors.As(err, &fe) || fe.Field != "len" {
		t.Errorf("DecodeSegs of a short array: %v", err)
	}
	if err := DecodeSegs(b, gl, nil); err == nil {
		t.Errorf("DecodeSegs of a long array: no error")
	}
}

func TestWRReserved(t *testing.T) {
	w := sampleWR()
	for _, i := range []int{3, 4, 5, 6, 7, 122, 123, 124, 125, 126, 127} {
		b := make([]byte, EntrySize)
		w.Encode(b)
		b[i] = 0x40
		got, err := DecodeWR(b)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "reserved" || fe.In != "work request" {
			t.Fatalf("reserved byte %d set: DecodeWR error %v", i, err)
		}
		if wantOff := map[bool]int{true: 3, false: 122}[i < 8]; fe.Offset != wantOff {
			t.Errorf("byte %d: error offset %d, want %d", i, fe.Offset, wantOff)
		}
		if got != w {
			t.Errorf("byte %d: the WR is not decoded along with the error: %+v", i, got)
		}
	}
	// An unknown op is not DecodeWR's business.
	b := make([]byte, EntrySize)
	b[0] = 200
	if got, err := DecodeWR(b); err != nil || got.Op != 200 {
		t.Errorf("op 200: %+v, %v", got, err)
	}
	for _, n := range []int{0, 1, 127} {
		_, err := DecodeWR(make([]byte, n))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "entry" {
			t.Errorf("%d bytes: DecodeWR error %v", n, err)
		}
	}
}

func sampleCQE() CQE {
	return CQE{
		Context: 0x0102030405060708, Flags: 1<<11 | 1<<1, Len: 0x1111111111111111, Buf: 0x2222222222222222,
		Data: 0x3333333333333333, Tag: 0x4444444444444444, SrcAddr: ^uint64(0), Err: -265, ProvErrno: 0x7abcdef0,
		OLen: 0x5555555555555555, Desc: 0x6666666666666666, ErrData: [ErrDataSize]byte{0: 2, 3: 7, 31: 0x77},
	}
}

func TestCQELayout(t *testing.T) {
	c := sampleCQE()
	b := make([]byte, EntrySize)
	for i := range b {
		b[i] = 0xff
	}
	c.Encode(b)
	// docs/abi.md, "Completion (128 bytes)".
	checkFields(t, b, []field{
		{"op_context", 0, 8, 0x0102030405060708},
		{"flags", 8, 8, 1<<11 | 1<<1},
		{"len", 16, 8, 0x1111111111111111},
		{"buf", 24, 8, 0x2222222222222222},
		{"data", 32, 8, 0x3333333333333333},
		{"tag", 40, 8, 0x4444444444444444},
		{"src_addr", 48, 8, ^uint64(0)},
		{"err", 56, 4, uint64(uint32(0xFFFFFEF7))}, // -265, two's complement
		{"prov_errno", 60, 4, 0x7abcdef0},
		{"olen", 64, 8, 0x5555555555555555},
		{"desc", 72, 8, 0x6666666666666666},
	})
	if b[80] != 2 || b[83] != 7 || b[111] != 0x77 {
		t.Errorf("err_data at 80..112: % x", b[80:112])
	}
	checkZero(t, b, 112, 128)
	got, err := DecodeCQE(b)
	if err != nil || got != c {
		t.Errorf("DecodeCQE = %+v, %v; want %+v", got, err, c)
	}
	if got.Err != -265 {
		t.Errorf("err = %d, want -265", got.Err)
	}
	for i := 112; i < 128; i++ {
		b := make([]byte, EntrySize)
		c.Encode(b)
		b[i] = 1
		got, err := DecodeCQE(b)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "reserved" || fe.Offset != 112 || fe.In != "completion" {
			t.Fatalf("reserved byte %d set: DecodeCQE error %v", i, err)
		}
		if got != c {
			t.Errorf("byte %d: the CQE is not decoded along with the error", i)
		}
	}
	var fe *FieldError
	if _, err := DecodeCQE(make([]byte, 100)); !errors.As(err, &fe) || fe.Field != "entry" {
		t.Errorf("short: DecodeCQE error %v", err)
	}
}

func TestEncodePanicsShort(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Encode into 127 bytes did not panic")
		}
	}()
	w := sampleWR()
	w.Encode(make([]byte, 127))
}
