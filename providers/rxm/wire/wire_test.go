package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/testhex"
)

// The private data below is from testdata/pingpong_1000.txt and
// testdata/probe_*.txt (real libfabric 1.17).
var connectTests = []struct {
	name string
	c    Connect
	wire string
}{
	{"fi_pingpong client", Connect{Port: 47973, FlowCtrl: FlowCtrlPeerOff, EagerLimit: 16384, RxSize: 4096,
		ConnID: MakeConnID(0x113f, 0)},
		"01 02 04 03 65bb 02 00 00400000 00100000 00000000 3f110000"},
	{"rxm_probe b (probe_simul)", NewConnect(47832, MakeConnID(0x12d7, 0)),
		"01 02 04 03 d8ba 02 00 00400000 00100000 00000000 d7120000"},
	{"index 5", NewConnect(1, MakeConnID(1, 5)),
		"01 02 04 03 0100 02 00 00400000 00100000 05000000 01000000"},
	{"old peer, flow control on", Connect{Port: 7, FlowCtrl: FlowCtrlPeerOn, EagerLimit: 16384, RxSize: 128},
		"01 02 04 03 0700 01 00 00400000 80000000 00000000 00000000"},
}

func TestConnect(t *testing.T) {
	for _, tt := range connectTests {
		want := testhex.Bytes(t, tt.wire)
		got, err := tt.c.Encode()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: Encode(%+v) = %x, %v; want %x", tt.name, tt.c, got, err, want)
		}
		c, err := DecodeConnect(want)
		if err != nil || c != tt.c {
			t.Errorf("%s: DecodeConnect(%x) = %+v, %v; want %+v", tt.name, want, c, err, tt.c)
		}
	}
	id := MakeConnID(0x7e03, 9)
	if id.PID() != 0x7e03 || id.Index() != 9 || uint64(id) != 0x00007e0300000009 {
		t.Errorf("MakeConnID(0x7e03, 9) = %#x: pid %#x index %d", uint64(id), id.PID(), id.Index())
	}
}

func TestConnectErrors(t *testing.T) {
	bad := []struct {
		name string
		wire string
	}{
		{"empty", ""},
		{"23 bytes", "01 02 04 03 70bb 02 00 00400000 00100000 00000000 037e00"},
		{"25 bytes", "01 02 04 03 70bb 02 00 00400000 00100000 00000000 037e0000 00"},
		{"cm version 2", "02 02 04 03 70bb 02 00 00400000 00100000 00000000 037e0000"},
		{"big endian", "01 01 04 03 70bb 02 00 00400000 00100000 00000000 037e0000"},
		{"ctrl version 3", "01 02 03 03 70bb 02 00 00400000 00100000 00000000 037e0000"},
		{"op version 2", "01 02 04 02 70bb 02 00 00400000 00100000 00000000 037e0000"},
		{"port 0", "01 02 04 03 0000 02 00 00400000 00100000 00000000 037e0000"},
		{"flow_ctrl 3", "01 02 04 03 70bb 03 00 00400000 00100000 00000000 037e0000"},
		{"eager limit 8192", "01 02 04 03 70bb 02 00 00200000 00100000 00000000 037e0000"},
		{"index 2^31", "01 02 04 03 70bb 02 00 00400000 00100000 00000080 037e0000"},
	}
	for _, tt := range bad {
		b := testhex.Bytes(t, tt.wire)
		if c, err := DecodeConnect(b); err == nil {
			t.Errorf("%s: DecodeConnect(%x) = %+v, want error", tt.name, b, c)
		}
	}
	b := testhex.Bytes(t, "01 02 04 03 70bb 02 00 00200000 00100000 00000000 037e0000")
	if _, err := DecodeConnect(b); !errors.Is(err, ErrEagerLimit) {
		t.Errorf("DecodeConnect(eager limit 8192) = %v, want ErrEagerLimit", err)
	}
	for _, c := range []Connect{{}, {Port: 1}, {Port: 1, EagerLimit: EagerLimit, FlowCtrl: 3}} {
		if b, err := c.Encode(); err == nil {
			t.Errorf("Encode(%+v) = %x, want error", c, b)
		}
	}
}

func TestAccept(t *testing.T) {
	tests := []struct {
		a    Accept
		wire string
	}{
		// fi_pingpong server, testdata/pingpong_1000.txt
		{NewAccept(MakeConnID(0x113d, 0)), "00000000 3d110000 00100000 02 000000"},
		{Accept{ConnID: MakeConnID(1, 2), RxSize: 3, FlowCtrl: FlowCtrlLocal}, "02000000 01000000 03000000 00 000000"},
	}
	for _, tt := range tests {
		want := testhex.Bytes(t, tt.wire)
		got, err := tt.a.Encode()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Encode(%+v) = %x, %v; want %x", tt.a, got, err, want)
		}
		a, err := DecodeAccept(want)
		if err != nil || a != tt.a {
			t.Errorf("DecodeAccept(%x) = %+v, %v; want %+v", want, a, err, tt.a)
		}
	}
	for _, s := range []string{"", "00000000 3d110000 00100000 02 0000", "00000000 3d110000 00100000 03 000000",
		"00000080 3d110000 00100000 02 000000", "00000000 3d110000 00100000 02 000000 00"} {
		b := testhex.Bytes(t, s)
		if a, err := DecodeAccept(b); err == nil {
			t.Errorf("DecodeAccept(%x) = %+v, want error", b, a)
		}
	}
}

func TestReject(t *testing.T) {
	for _, tt := range []struct {
		r    RejectReason
		wire string
	}{
		{RejectUnspec, "0100"},
		{RejectConnRefused, "0101"}, // testdata/probe_reject.txt
		{RejectAlready, "0102"},     // testdata/probe_simul.txt
	} {
		want := testhex.Bytes(t, tt.wire)
		r := Reject{Reason: tt.r}
		got, err := r.Encode()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Encode(%v) = %x, %v; want %x", tt.r, got, err, want)
		}
		if d, err := DecodeReject(want); err != nil || d != r {
			t.Errorf("DecodeReject(%x) = %+v, %v", want, d, err)
		}
	}
	for _, s := range []string{"", "01", "0201", "0103", "010100"} {
		b := testhex.Bytes(t, s)
		if r, err := DecodeReject(b); err == nil {
			t.Errorf("DecodeReject(%x) = %+v, want error", b, r)
		}
	}
	if b, err := (&Reject{Reason: 3}).Encode(); err == nil {
		t.Errorf("Encode(reason 3) = %x, want error", b)
	}
}

// headerTests: the first ones are rxm headers from testdata (the tcp
// payload's first 64 bytes), stale fields included.
var headerTests = []struct {
	name string
	h    Header
	wire string
}{
	{"eager 1000 (pingpong_1000)", Eager(0, OpMsg, 1000, 0, 0, 0),
		"04 00 0000 00000000 0000000000000000 0000000000000000 0000000000000000" +
			"02 00 00 00 00000000 e803000000000000 0000000000000000 0000000000000000"},
	{"senddata (probe_data)", Eager(0, OpMsg, 100, FlagRemoteCQData, 0x1111, 0),
		"04 00 0000 00000000 0000000000000000 0000000000000000 0000000000000000" +
			"02 00 00 00 00000200 6400000000000000 1111000000000000 0000000000000000"},
	{"tagged rendezvous with data (probe_data)", RndvReq(0, 0, OpTagged, 20000, FlagRemoteCQData, 0x5555, 0x55),
		"04 02 0000 00000000 0000000000000000 0000000000000000 0000000000000000" +
			"02 00 01 00 00000200 204e000000000000 5555000000000000 5500000000000000"},
	{"read-done with a stale op header (pingpong_tagged_20000)",
		Header{Type: CtrlRndvRdDone, Op: OpTagged, Size: 20000, Tag: 1234},
		"04 03 0000 00000000 0000000000000000 0000000000000000 0000000000000000" +
			"02 00 01 00 00000000 204e000000000000 0000000000000000 d204000000000000"},
	{"first segment (pingpong_sar_tagged_40000)",
		Header{Type: CtrlSeg, SegSize: 16384, CtrlData: 1, Op: OpTagged, Size: 40000, Tag: 1234},
		"04 01 0040 00000000 0000000000000000 0000000000000000 0100000000000000" +
			"02 00 01 00 00000000 409c000000000000 0000000000000000 d204000000000000"},
	{"last segment", Header{Type: CtrlSeg, SegSize: 7232, SegNo: 2, CtrlData: 3, Op: OpTagged, Size: 40000, Tag: 1234},
		"04 01 401c 02000000 0000000000000000 0000000000000000 0300000000000000" +
			"02 00 01 00 00000000 409c000000000000 0000000000000000 d204000000000000"},
	{"eager after segments, stale seg fields",
		Header{Type: CtrlEager, SegSize: 7232, SegNo: 2, CtrlData: 3, Op: OpTagged, Size: 4, Tag: 1234},
		"04 00 401c 02000000 0000000000000000 0000000000000000 0300000000000000" +
			"02 00 01 00 00000000 0400000000000000 0000000000000000 d204000000000000"},
	{"compare-swap request (probe_data)",
		Header{Type: CtrlAtomic, Op: OpAtomicCompare, Size: 112, Tag: AtomicTag(fi.UINT64, fi.CSWAP, 1)},
		"04 04 0000 00000000 0000000000000000 0000000000000000 0000000000000000" +
			"02 00 08 00 00000000 7000000000000000 0000000000000000 070c010000000000"},
	{"fetch response (probe_data)",
		Header{Type: CtrlAtomicResp, Op: OpAtomicFetch, Size: 16, Tag: AtomicTag(fi.UINT64, fi.SUM, 0)},
		"04 05 0000 00000000 0000000000000000 0000000000000000 0000000000000000" +
			"02 00 07 00 00000000 1000000000000000 0000000000000000 0702000000000000"},
	{"read-done to index 3, msg 0x1234", ReadDone(3, 0x1234),
		"04 03 0000 00000000 0300000000000000 3412000000000000 0000000000000000" +
			"02 00 00 00 00000000 0000000000000000 0000000000000000 0000000000000000"},
	{"write-data", Header{Type: CtrlRndvWrData, ConnID: 1, MsgID: 2, Op: 0xee, Flags: 0xffffffff},
		"04 07 0000 00000000 0100000000000000 0200000000000000 0000000000000000" +
			"02 00 ee 00 ffffffff 0000000000000000 0000000000000000 0000000000000000"},
	{"write-done", Header{Type: CtrlRndvWrDone, ConnID: 1, MsgID: 2},
		"04 08 0000 00000000 0100000000000000 0200000000000000 0000000000000000" +
			"02 00 00 00 00000000 0000000000000000 0000000000000000 0000000000000000"},
	{"credit", Header{Type: CtrlCredit, MsgID: 5, CtrlData: 64, Op: Op(CtrlCredit)},
		"04 06 0000 00000000 0000000000000000 0500000000000000 4000000000000000" +
			"02 00 06 00 00000000 0000000000000000 0000000000000000 0000000000000000"},
	{"stale rx_index and op_data", Header{Type: CtrlEager, RxIndex: 9, OpData: 7, MsgID: ^uint64(0), Size: 16384},
		"04 00 0000 00000000 0000000000000000 ffffffffffffffff 0000000000000000" +
			"02 09 00 07 00000000 0040000000000000 0000000000000000 0000000000000000"},
}

func TestHeaderEncodeDecode(t *testing.T) {
	for _, tt := range headerTests {
		want := testhex.Bytes(t, tt.wire)
		if len(want) != HeaderSize {
			t.Fatalf("%s: test vector of %d bytes", tt.name, len(want))
		}
		got, err := AppendHeader(nil, &tt.h)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: AppendHeader(%+v) =\n%x, %v; want\n%x", tt.name, tt.h, got, err, want)
		}
		var h Header
		if err := h.Decode(want); err != nil || h != tt.h {
			t.Errorf("%s: Decode(%x) = %+v, %v; want %+v", tt.name, want, h, err, tt.h)
		}
		if err := h.Decode(append(want, 1, 2, 3)); err != nil || h != tt.h {
			t.Errorf("%s: Decode with trailing bytes = %+v, %v", tt.name, h, err)
		}
	}
}

func TestHeaderDecodeErrors(t *testing.T) {
	good := testhex.Bytes(t, headerTests[0].wire)
	bad := []struct {
		name   string
		mutate func(b []byte)
	}{
		{"ctrl version 3", func(b []byte) { b[0] = 3 }},
		{"op version 3", func(b []byte) { b[32] = 3 }},
		{"type 9", func(b []byte) { b[1] = 9 }},
		{"type 255", func(b []byte) { b[1] = 255 }},
		{"conn_id 2^31", func(b []byte) { b[11] = 0x80 }},
		{"conn_id -1", func(b []byte) { copy(b[8:16], bytes.Repeat([]byte{0xff}, 8)) }},
		{"eager op 2", func(b []byte) { b[34] = 2 }},
		{"eager op atomic", func(b []byte) { b[34] = 6 }},
		{"eager flag FI_SEND", func(b []byte) { b[37] = 0x08 }},
		{"eager flag FI_TAGGED", func(b []byte) { b[36] = 0x08 }},
		{"eager of 16385 bytes", func(b []byte) { b[40], b[41] = 0x01, 0x40 }},
		{"rndv op 5", func(b []byte) { b[1], b[34] = 2, 5 }},
		{"segment without type", func(b []byte) { b[1], b[2] = 1, 1 }},
		{"segment of 0 bytes", func(b []byte) { b[1], b[24] = 1, 1 }},
		{"segment of 16385 bytes", func(b []byte) { b[1], b[2], b[3], b[24] = 1, 0x01, 0x40, 1 }},
		{"atomic with op msg", func(b []byte) { b[1], b[40] = 4, 96 }},
		{"atomic with data flag", func(b []byte) { b[1], b[34], b[38], b[40] = 4, 6, 2, 96 }},
		{"atomic of 95 bytes", func(b []byte) { b[1], b[34], b[40] = 4, 6, 95 }},
		{"atomic of 16385 bytes", func(b []byte) { b[1], b[34], b[40], b[41] = 4, 6, 1, 0x40 }},
		{"atomic response of 7 bytes", func(b []byte) { b[1], b[34], b[40] = 5, 7, 7 }},
		{"atomic response op tagged", func(b []byte) { b[1], b[34], b[40] = 5, 1, 8 }},
	}
	for _, tt := range bad {
		b := bytes.Clone(good)
		b[40] = 0 // size 0 unless the case sets it
		b[41] = 0
		tt.mutate(b)
		var h Header
		if err := h.Decode(b); err == nil {
			t.Errorf("%s: Decode(%x) = %+v, want error", tt.name, b, h)
		}
		if h != (Header{}) {
			t.Errorf("%s: failed Decode changed the header to %+v", tt.name, h)
		}
	}
	var h Header
	if err := h.Decode(good[:HeaderSize-1]); !errors.Is(err, ErrShort) {
		t.Errorf("Decode(63 bytes) = %v, want ErrShort", err)
	}
	if err := headerTests[0].h.Encode(make([]byte, HeaderSize-1)); !errors.Is(err, ErrShort) {
		t.Errorf("Encode into 63 bytes = %v, want ErrShort", err)
	}
	for _, h := range []Header{{Type: 9}, {Type: CtrlEager, Size: EagerLimit + 1}, {Type: CtrlEager, Op: 3},
		{Type: CtrlAtomic, Op: OpAtomic, Size: 10}, {Type: CtrlRndvReq, Flags: 1}} {
		if b, err := AppendHeader(nil, &h); err == nil {
			t.Errorf("AppendHeader(%+v) = %x, want error", h, b)
		}
	}
}

func TestBodyLen(t *testing.T) {
	tests := []struct {
		h    Header
		n    uint64 // tcp payload
		body uint64 // 0 and ok false: error
		ok   bool
	}{
		{Eager(0, OpMsg, 1000, 0, 0, 0), 1064, 1000, true},
		{Eager(0, OpMsg, 1000, 0, 0, 0), 1063, 0, false},
		{Eager(0, OpMsg, 1000, 0, 0, 0), 1065, 0, false},
		{Eager(0, OpMsg, 0, 0, 0, 0), 64, 0, true},
		{Eager(0, OpMsg, 0, 0, 0, 0), 63, 0, false},
		{Header{Type: CtrlSeg, SegSize: 7232, Size: 40000}, 64 + 7232, 7232, true},
		{Header{Type: CtrlSeg, SegSize: 7232, Size: 40000}, 64 + 40000, 0, false},
		{RndvReq(0, 0, OpMsg, 100000, 0, 0, 0), 168, 104, true},
		{RndvReq(0, 0, OpMsg, 100000, 0, 0, 0), 168 + 100, 204, true}, // FI_BUFFERED_RECV
		{RndvReq(0, 0, OpMsg, 100000, 0, 0, 0), 167, 0, false},
		{RndvReq(0, 0, OpMsg, 100000, 0, 0, 0), 168 + EagerLimit + 1, 0, false},
		{Header{Type: CtrlRndvWrData}, 168, 104, true},
		{ReadDone(0, 0), 64, 0, true},
		{Header{Type: CtrlRndvRdDone, Size: 20000}, 64, 0, true}, // stale size is not a length
		{ReadDone(0, 0), 65, 0, false},
		{Header{Type: CtrlAtomic, Op: OpAtomic, Size: 104}, 168, 104, true},
		{Header{Type: CtrlAtomicResp, Op: OpAtomic, Size: 8}, 72, 8, true},
		{Header{Type: CtrlAtomicResp, Op: OpAtomic, Size: 8}, 64, 0, false},
		{Header{Type: CtrlCredit}, 64, 0, true},
	}
	for _, tt := range tests {
		body, err := tt.h.BodyLen(tt.n)
		if (err == nil) != tt.ok || body != tt.body {
			t.Errorf("%+v.BodyLen(%d) = %d, %v; want %d, ok %v", tt.h, tt.n, body, err, tt.body, tt.ok)
		}
	}
}

// rndvTests: the rendezvous headers of testdata/pingpong_100000.txt and a
// synthetic four-entry one.
var rndvTests = []struct {
	name string
	r    RndvHeader
	wire string
}{
	{"pingpong 100000", RndvHeader{Count: 1, Iov: [4]RMAIov{{Addr: 0, Len: 100000, Key: RndvKey(0)}}},
		"0000000000000000 a086010000000000 0000008000000000" + strings.Repeat("00", 72) + "01 00000000000000"},
	{"four entries, stale padding", RndvHeader{Count: 4,
		Iov: [4]RMAIov{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}}, Pad: [7]byte{1, 2, 3, 4, 5, 6, 7}},
		"0100000000000000 0200000000000000 0300000000000000" +
			"0400000000000000 0500000000000000 0600000000000000" +
			"0700000000000000 0800000000000000 0900000000000000" +
			"0a00000000000000 0b00000000000000 0c00000000000000 04 01020304050607"},
	{"stale entries past the count", RndvHeader{Count: 1, Iov: [4]RMAIov{{0, 9, 1}, {0xff, 0xff, 0xff}}},
		"0000000000000000 0900000000000000 0100000000000000" +
			"ff00000000000000 ff00000000000000 ff00000000000000" + strings.Repeat("00", 48) + "01 00000000000000"},
}

func TestRndvHeader(t *testing.T) {
	for _, tt := range rndvTests {
		want := testhex.Bytes(t, tt.wire)
		got, err := AppendRndvHeader(nil, &tt.r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: AppendRndvHeader = %x, %v; want %x", tt.name, got, err, want)
		}
		var r RndvHeader
		if err := r.Decode(want); err != nil || r != tt.r {
			t.Errorf("%s: Decode = %+v, %v; want %+v", tt.name, r, err, tt.r)
		}
	}
	if err := rndvTests[0].r.CheckSize(100000); err != nil {
		t.Errorf("CheckSize(100000) = %v", err)
	}
	if err := rndvTests[0].r.CheckSize(99999); err == nil {
		t.Errorf("CheckSize(99999) succeeded for a 100000-byte header")
	}
	if n := rndvTests[1].r.Total(); n != 2+5+8+11 {
		t.Errorf("Total() = %d, want 26", n)
	}
	bad := []RndvHeader{
		{Count: 0},
		{Count: 5},
		{Count: 2, Iov: [4]RMAIov{{Len: ^uint64(0)}, {Len: 1}}},
	}
	for _, r := range bad {
		if b, err := AppendRndvHeader(nil, &r); err == nil {
			t.Errorf("AppendRndvHeader(%+v) = %x, want error", r, b)
		}
		b := make([]byte, RndvHeaderSize)
		for i, v := range r.Iov {
			b[i*24+8] = byte(v.Len)
			if v.Len == ^uint64(0) {
				copy(b[i*24+8:], bytes.Repeat([]byte{0xff}, 8))
			}
		}
		b[96] = r.Count
		var d RndvHeader
		if err := d.Decode(b); err == nil {
			t.Errorf("Decode(%x) = %+v, want error", b, d)
		}
	}
	var r RndvHeader
	if err := r.Decode(make([]byte, RndvHeaderSize-1)); !errors.Is(err, ErrShort) {
		t.Errorf("Decode(103 bytes) = %v, want ErrShort", err)
	}
	if got := RndvKey(3); got != 0x80000003 {
		t.Errorf("RndvKey(3) = %#x", got)
	}
}

func TestAtomicRequest(t *testing.T) {
	// testdata/probe_data.txt: fi_compare_atomic(FI_CSWAP, FI_UINT64) of one
	// element at offset 1024, key 0, operand 99, compare 12.
	body := testhex.Bytes(t, "0004000000000000 0100000000000000 0000000000000000"+strings.Repeat("00", 72)+
		"6300000000000000 0c00000000000000")
	h := Header{Type: CtrlAtomic, Op: OpAtomicCompare, Size: 112, Tag: AtomicTag(fi.UINT64, fi.CSWAP, 1)}
	r, err := DecodeAtomicRequest(&h, body)
	if err != nil {
		t.Fatalf("DecodeAtomicRequest = %v", err)
	}
	want := AtomicRequest{Datatype: fi.UINT64, AtomicOp: fi.CSWAP, Count: 1,
		Ioc:     [4]RMAIoc{{Addr: 1024, Count: 1}},
		Operand: testhex.Bytes(t, "6300000000000000"), Compare: testhex.Bytes(t, "0c00000000000000")}
	if r.Datatype != want.Datatype || r.AtomicOp != want.AtomicOp || r.Count != want.Count || r.Ioc != want.Ioc ||
		!bytes.Equal(r.Operand, want.Operand) || !bytes.Equal(r.Compare, want.Compare) {
		t.Errorf("DecodeAtomicRequest = %+v, want %+v", r, want)
	}
	if got, err := r.AppendBody(nil, OpAtomicCompare); err != nil || !bytes.Equal(got, body) {
		t.Errorf("AppendBody = %x, %v; want %x", got, err, body)
	}
	if got := r.Header(0, 0, OpAtomicCompare); got != h {
		t.Errorf("Header = %+v, want %+v", got, h)
	}

	// fi_fetch_atomic(FI_ATOMIC_READ): no operand.
	read := AtomicRequest{Datatype: fi.UINT32, AtomicOp: fi.ATOMIC_READ, Count: 2,
		Ioc: [4]RMAIoc{{Addr: 8, Count: 3, Key: 1}, {Addr: 64, Count: 1, Key: 1}}}
	rb, err := read.AppendBody(nil, OpAtomicFetch)
	if err != nil || len(rb) != AtomicHeaderSize {
		t.Fatalf("AppendBody(atomic read) = %d bytes, %v", len(rb), err)
	}
	rh := read.Header(1, 2, OpAtomicFetch)
	if d, err := DecodeAtomicRequest(&rh, rb); err != nil || d.Count != 2 || len(d.Operand) != 0 || d.Compare != nil {
		t.Errorf("DecodeAtomicRequest(atomic read) = %+v, %v", d, err)
	}

	bad := []struct {
		name string
		o    Op
		r    AtomicRequest
	}{
		{"op msg", OpMsg, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.SUM, Count: 1, Ioc: [4]RMAIoc{{Count: 1}}, Operand: []byte{1}}},
		{"datatype 16", OpAtomic, AtomicRequest{Datatype: 16, AtomicOp: fi.SUM, Count: 1, Ioc: [4]RMAIoc{{Count: 1}}, Operand: []byte{1}}},
		{"cswap with atomic", OpAtomic, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.CSWAP, Count: 1, Ioc: [4]RMAIoc{{Count: 1}}, Operand: []byte{1}}},
		{"read with atomic", OpAtomic, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.ATOMIC_READ, Count: 1, Ioc: [4]RMAIoc{{Count: 1}}}},
		{"sum with compare", OpAtomicCompare, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.SUM, Count: 1, Ioc: [4]RMAIoc{{Count: 1}}, Operand: []byte{1}, Compare: []byte{1}}},
		{"no entries", OpAtomic, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.SUM}},
		{"five entries", OpAtomic, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.SUM, Count: 5}},
		{"short operand", OpAtomic, AtomicRequest{Datatype: fi.UINT16, AtomicOp: fi.SUM, Count: 1, Ioc: [4]RMAIoc{{Count: 1}}, Operand: []byte{1}}},
		{"missing compare", OpAtomicCompare, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.CSWAP, Count: 1, Ioc: [4]RMAIoc{{Count: 1}}, Operand: []byte{1}}},
		{"huge count", OpAtomic, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.SUM, Count: 2, Ioc: [4]RMAIoc{{Count: ^uint64(0)}, {Count: 2}}, Operand: []byte{1}}},
		{"too big", OpAtomic, AtomicRequest{Datatype: fi.UINT8, AtomicOp: fi.SUM, Count: 1, Ioc: [4]RMAIoc{{Count: EagerLimit}}, Operand: make([]byte, EagerLimit)}},
	}
	for _, tt := range bad {
		if b, err := tt.r.AppendBody(nil, tt.o); err == nil {
			t.Errorf("%s: AppendBody = %x, want error", tt.name, b)
		}
	}

	badDecode := []struct {
		name string
		h    Header
		body []byte
	}{
		{"not atomic", Eager(0, OpMsg, 112, 0, 0, 0), body},
		{"size mismatch", Header{Type: CtrlAtomic, Op: OpAtomicCompare, Size: 113, Tag: h.Tag}, body},
		{"two entries, data for one", Header{Type: CtrlAtomic, Op: OpAtomicCompare, Size: 112, Tag: AtomicTag(fi.UINT64, fi.CSWAP, 2)},
			append(append(bytes.Clone(body[:32]), 1), body[33:]...)}, // second entry: 1 element
		{"tag bits above count", Header{Type: CtrlAtomic, Op: OpAtomicCompare, Size: 112, Tag: h.Tag | 1<<24}, body},
		{"odd compare", Header{Type: CtrlAtomic, Op: OpAtomicCompare, Size: 111, Tag: h.Tag}, body[:111]},
		{"short", Header{Type: CtrlAtomic, Op: OpAtomic, Size: 95, Tag: h.Tag}, body[:95]},
	}
	for _, tt := range badDecode {
		if r, err := DecodeAtomicRequest(&tt.h, tt.body); err == nil {
			t.Errorf("%s: DecodeAtomicRequest = %+v, want error", tt.name, r)
		}
	}
}

func TestAtomicResponse(t *testing.T) {
	req := Header{Type: CtrlAtomic, ConnID: 0, MsgID: 0, Op: OpAtomicFetch, Size: 104, Tag: AtomicTag(fi.UINT64, fi.SUM, 1)}
	tests := []struct {
		name string
		req  Header
		r    AtomicResponse
		body string
	}{
		// testdata/probe_data.txt
		{"fetch", req, AtomicResponse{Result: testhex.Bytes(t, "0c00000000000000")}, "00000000 00000008 0c00000000000000"},
		{"atomic", Header{Type: CtrlAtomic, Op: OpAtomic, Size: 104, Tag: AtomicTag(fi.UINT64, fi.SUM, 1)},
			AtomicResponse{}, "00000000 00000000"},
		{"bad key", Header{Type: CtrlAtomic, Op: OpAtomic, Size: 104, Tag: AtomicTag(fi.UINT64, fi.SUM, 1)},
			AtomicResponse{Status: -int32(fi.EACCES)}, "fffffff3 00000000"},
	}
	for _, tt := range tests {
		want := testhex.Bytes(t, tt.body)
		h := tt.r.Header(0, &tt.req)
		dt, _, _ := tt.req.AtomicFields()
		got, err := tt.r.AppendBody(nil, tt.req.Op, dt)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: AppendBody = %x, %v; want %x", tt.name, got, err, want)
		}
		if h.Size != uint64(len(want)) || h.Op != tt.req.Op || h.MsgID != tt.req.MsgID {
			t.Errorf("%s: Header = %+v", tt.name, h)
		}
		d, err := DecodeAtomicResponse(&h, want)
		if err != nil || d.Status != tt.r.Status || !bytes.Equal(d.Result, tt.r.Result) {
			t.Errorf("%s: DecodeAtomicResponse = %+v, %v; want %+v", tt.name, d, err, tt.r)
		}
	}
	var none AtomicResponse
	fetch := none.Header(0, &req)
	bad := []struct {
		name string
		h    Header
		body string
	}{
		{"positive status", fetch, "00000001 00000000"},
		{"error with result", Header{Type: CtrlAtomicResp, Op: OpAtomicFetch, Size: 16, Tag: fetch.Tag}, "fffffff3 00000008 0c00000000000000"},
		{"result for atomic", Header{Type: CtrlAtomicResp, Op: OpAtomic, Size: 16, Tag: fetch.Tag}, "00000000 00000008 0c00000000000000"},
		{"result_len mismatch", Header{Type: CtrlAtomicResp, Op: OpAtomicFetch, Size: 16, Tag: fetch.Tag}, "00000000 00000007 0c00000000000000"},
		{"partial element", Header{Type: CtrlAtomicResp, Op: OpAtomicFetch, Size: 12, Tag: fetch.Tag}, "00000000 00000004 0c000000"},
		{"size mismatch", fetch, "00000000 00000000 00"},
		{"ioc_count 1", Header{Type: CtrlAtomicResp, Op: OpAtomic, Size: 8, Tag: AtomicTag(fi.UINT64, fi.SUM, 1)}, "00000000 00000000"},
		{"bad datatype", Header{Type: CtrlAtomicResp, Op: OpAtomic, Size: 8, Tag: AtomicTag(99, fi.SUM, 0)}, "00000000 00000000"},
		{"not a response", req, "00000000 00000000"},
	}
	for _, tt := range bad {
		b := testhex.Bytes(t, tt.body)
		if r, err := DecodeAtomicResponse(&tt.h, b); err == nil {
			t.Errorf("%s: DecodeAtomicResponse(%x) = %+v, want error", tt.name, b, r)
		}
	}
}

// TestConstants pins the values libfabric 1.17 uses (prov/rxm/src/rxm.h,
// include/ofi_proto.h, include/rdma/fabric.h).
func TestConstants(t *testing.T) {
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"RXM_CM_DATA_VERSION", CMVersion, 1},
		{"RXM_CTRL_VERSION", CtrlVersion, 4},
		{"RXM_OP_VERSION", CMOpVersion, 3},
		{"OFI_OP_VERSION", OpVersion, 2},
		{"OFI_ENDIAN_LITTLE", EndianLittle, 2},
		{"rxm_buffer_size", EagerLimit, 16384},
		{"RXM_MSG_SRX_SIZE", RxSize, 4096},
		{"sizeof(union rxm_cm_data)", ConnectSize, 24},
		{"sizeof(struct rxm_pkt)", HeaderSize, 64},
		{"sizeof(struct rxm_rndv_hdr)", RndvHeaderSize, 104},
		{"sizeof(struct rxm_atomic_hdr)", AtomicHeaderSize, 96},
		{"sizeof(struct rxm_atomic_resp_hdr)", AtomicRespSize, 8},
		{"FI_REMOTE_CQ_DATA", uint64(FlagRemoteCQData), uint64(fi.REMOTE_CQ_DATA)},
		{"FI_PROV_SPECIFIC", KeyProvSpecific, 0x80000000},
		{"rxm_ctrl_rndv_wr_done", uint64(CtrlRndvWrDone), 8},
		{"ofi_op_atomic_compare", uint64(OpAtomicCompare), 8},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}
