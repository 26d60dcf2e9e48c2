package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/internal/testhex"
)

var cmTests = []struct {
	name string
	typ  CMType
	data string
	key  string
	wire string // header fields separated as in the reference table
}{
	{"connreq no data", CMConnReq, "", "",
		"03 00 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"connreq data", CMConnReq, "hi", "",
		"03 00 0002 00000000 0000000000000000 0000000000000000 0100000000000000 6869"},
	{"connresp data", CMConnResp, "ok!", "",
		"03 01 0003 00000000 0000000000000000 0000000000000000 0100000000000000 6f6b21"},
	{"reject data", CMReject, "no", "",
		"03 06 0002 00000000 0000000000000000 0000000000000000 0000000000000000 6e6f"},
	{"reject 256", CMReject, strings.Repeat("x", 256), "",
		"03 06 0100 00000000 0000000000000000 0000000000000000 0000000000000000" + strings.Repeat("78", 256)},
	// fabricfs's authorization key: seg_no its length, msg_id "fabricfs",
	// the key after the data.
	{"connreq key", CMConnReq, "hi", "k3y",
		"03 00 0002 00000003 0000000000000000 6661627269636673 0100000000000000 6869 6b3379"},
	{"connresp key", CMConnResp, "", strings.Repeat("k", 64),
		"03 01 0000 00000040 0000000000000000 6661627269636673 0100000000000000" + strings.Repeat("6b", 64)},
}

func TestCMEncodeDecode(t *testing.T) {
	for _, tt := range cmTests {
		want := testhex.Bytes(t, tt.wire)
		var key []byte
		if tt.key != "" {
			key = []byte(tt.key)
		}
		got, err := AppendCM(nil, tt.typ, []byte(tt.data), key)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: AppendCM(%v, %q, %q) = %x, %v; want %x", tt.name, tt.typ, tt.data, tt.key, got, err, want)
		}
		h, data, k, n, err := DecodeCM(want)
		if err != nil || h.Type != tt.typ || string(data) != tt.data || string(k) != tt.key || n != len(want) ||
			h.DataLen != len(tt.data) || h.KeyLen != len(tt.key) {
			t.Errorf("%s: DecodeCM(%x) = %+v, %q, %q, %d, %v", tt.name, want, h, data, k, n, err)
		}
	}
}

func TestCMRefusesLongData(t *testing.T) {
	if _, err := AppendCM(nil, CMConnReq, make([]byte, MaxCMData+1), nil); err == nil {
		t.Errorf("AppendCM with %d bytes succeeded", MaxCMData+1)
	}
	if _, err := AppendCM(nil, CMType(2), nil, nil); err == nil {
		t.Errorf("AppendCM of type 2 succeeded")
	}
	if _, err := AppendCM(nil, CMConnReq, nil, make([]byte, MaxAuthKey+1)); err == nil {
		t.Errorf("AppendCM with a %d-byte key succeeded", MaxAuthKey+1)
	}
	if _, err := AppendCM(nil, CMReject, nil, []byte("k")); err == nil {
		t.Errorf("AppendCM of a reject with a key succeeded")
	}
}

var badCMTests = []struct {
	name string
	wire string
}{
	{"short", "03 00 0000 00000000"},
	{"version 2", "02 00 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"version 4", "04 00 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"type 2", "03 02 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"type 5", "03 05 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"type 255", "03 ff 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"257 bytes", "03 00 0101 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"64k bytes", "03 01 ffff 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"big-endian peer", "03 00 0000 00000000 0000000000000000 0000000000000000 0000000000000001"},
	{"no probe", "03 01 0000 00000000 0000000000000000 0000000000000000 0000000000000000"},
	{"data missing", "03 00 0004 00000000 0000000000000000 0000000000000000 0100000000000000 6869"},
	{"key missing", "03 00 0000 00000004 0000000000000000 6661627269636673 0100000000000000 6869"},
	{"key of 0 bytes", "03 00 0000 00000000 0000000000000000 6661627269636673 0100000000000000"},
	{"key of 65 bytes", "03 00 0000 00000041 0000000000000000 6661627269636673 0100000000000000" + strings.Repeat("6b", 65)},
	{"key in a reject", "03 06 0000 00000001 0000000000000000 6661627269636673 0000000000000000 6b"},
}

func TestCMDecodeErrors(t *testing.T) {
	for _, tt := range badCMTests {
		b := testhex.Bytes(t, tt.wire)
		if h, _, _, _, err := DecodeCM(b); err == nil {
			t.Errorf("%s: DecodeCM(%x) = %+v, want error", tt.name, b, h)
		}
	}
	if _, err := DecodeCMHeader(nil); !errors.Is(err, ErrShort) {
		t.Errorf("DecodeCMHeader(nil) = %v, want ErrShort", err)
	}
}

var headerTests = []struct {
	name string
	h    Header
	wire string
}{
	{"send", Header{Op: OpMsg, ID: 7, Len: 5},
		"03 00 0000 00 00 10 07 1500000000000000"},
	{"empty send", Header{Op: OpMsg},
		"03 00 0000 00 00 10 00 1000000000000000"},
	{"senddata", Header{Op: OpMsg, Flags: FlagRemoteCQData, CQData: 0x1122334455667788, ID: 1, Len: 64},
		"03 00 0100 00 00 18 01 5800000000000000 8877665544332211"},
	{"delivery complete", Header{Op: OpMsg, Flags: FlagDeliveryComplete, ID: 2, Len: 4},
		"03 00 0400 00 00 10 02 1400000000000000"},
	{"commit complete with data", Header{Op: OpMsg, Flags: FlagCommitComplete | FlagRemoteCQData, CQData: 9, Len: 0},
		"03 00 0900 00 00 18 00 1800000000000000 0900000000000000"},
	{"rxm tagged", Header{Op: OpMsg, Flags: FlagTagged, Tag: 0xabcd, ID: 3, Len: 8},
		"03 00 8000 00 00 18 03 2000000000000000 cdab000000000000"},
	{"rxm tagged with data", Header{Op: OpMsg, Flags: FlagTagged | FlagRemoteCQData, Tag: 0xabcd, CQData: 0x42, Len: 8},
		"03 00 8100 00 00 20 00 2800000000000000 4200000000000000 cdab000000000000"},
	{"srx tagged", Header{Op: OpTagged, Tag: 5, Len: 1},
		"03 01 0000 00 00 18 00 1900000000000000 0500000000000000"},
	{"srx tagged with data", Header{Op: OpTagged, Flags: FlagRemoteCQData, Tag: 5, CQData: 6, Len: 1},
		"03 01 0100 00 00 20 00 2100000000000000 0600000000000000 0500000000000000"},
	{"write", Header{Op: OpWrite, RMACount: 1, RMA: [4]RMAIov{{Addr: 0x1000, Len: 16, Key: 0x80000001}}, Len: 16, ID: 9},
		"03 04 0000 00 01 28 09 3800000000000000 0010000000000000 1000000000000000 0100008000000000"},
	{"writedata dc", Header{Op: OpWrite, Flags: FlagRemoteCQData | FlagDeliveryComplete, CQData: 1, RMACount: 2,
		RMA: [4]RMAIov{{Addr: 1, Len: 2, Key: 3}, {Addr: 4, Len: 5, Key: 6}}, Len: 7},
		"03 04 0500 00 02 48 00 4f00000000000000 0100000000000000" +
			"0100000000000000 0200000000000000 0300000000000000" +
			"0400000000000000 0500000000000000 0600000000000000"},
	{"write 4 with data (max header)", Header{Op: OpWrite, Flags: FlagRemoteCQData, RMACount: 4,
		RMA: [4]RMAIov{{1, 1, 1}, {2, 1, 2}, {3, 1, 3}, {4, 1, 4}}, Len: 4},
		"03 04 0100 00 04 78 00 7c00000000000000 0000000000000000" +
			"0100000000000000 0100000000000000 0100000000000000" +
			"0200000000000000 0100000000000000 0200000000000000" +
			"0300000000000000 0100000000000000 0300000000000000" +
			"0400000000000000 0100000000000000 0400000000000000"},
	{"read request", Header{Op: OpReadReq, RMACount: 1, RMA: [4]RMAIov{{Addr: 0x2000, Len: 100, Key: 7}}},
		"03 02 0000 00 01 28 00 2800000000000000 0020000000000000 6400000000000000 0700000000000000"},
	{"read response", Header{Op: OpReadRsp, RMACount: 1, Len: 100},
		"03 03 0000 00 01 10 00 7400000000000000"},
	{"ack", Ack(4),
		"03 00 0000 02 00 10 04 1000000000000000"},
	{"ack with garbage", Header{Op: OpMsg, OpData: OpDataAck, Flags: FlagDeliveryComplete, RMACount: 0xcc},
		"03 00 0400 02 cc 10 00 1000000000000000"},
	{"send with garbage rma_iov_cnt", Header{Op: OpMsg, RMACount: 0xee, Len: 1},
		"03 00 0000 00 ee 10 00 1100000000000000"},
}

func TestHeaderEncodeDecode(t *testing.T) {
	for _, tt := range headerTests {
		want := testhex.Bytes(t, tt.wire)
		got, err := AppendHeader(nil, &tt.h)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: AppendHeader(%+v) = %x, %v; want %x", tt.name, tt.h, got, err, want)
		}
		if n, err := PeekHeaderSize(want); err != nil || n != len(want) {
			t.Errorf("%s: PeekHeaderSize = %d, %v; want %d", tt.name, n, err, len(want))
		}
		var h Header
		n, err := h.Decode(want)
		if err != nil || n != len(want) || h != tt.h {
			t.Errorf("%s: Decode(%x) = %+v, %d, %v; want %+v", tt.name, want, h, n, err, tt.h)
		}
		if h.Size() != len(want) {
			t.Errorf("%s: Size() = %d, want %d", tt.name, h.Size(), len(want))
		}
		// A header followed by more bytes decodes the same.
		if n, err := h.Decode(append(want, 1, 2, 3)); err != nil || n != len(want) {
			t.Errorf("%s: Decode with trailing bytes = %d, %v", tt.name, n, err)
		}
	}
}

var badHeaderTests = []struct {
	name string
	wire string
}{
	{"short", "03 00 0000 00 00 10 00 10000000"},
	{"version 2", "02 00 0000 00 00 10 00 1000000000000000"},
	{"version 0", "00 00 0000 00 00 10 00 1000000000000000"},
	{"op 5", "03 05 0000 00 00 10 00 1000000000000000"},
	{"op 255", "03 ff 0000 00 00 10 00 1000000000000000"},
	{"hdr_size 0", "03 00 0000 00 00 00 00 1000000000000000"},
	{"hdr_size 15", "03 00 0000 00 00 0f 00 1000000000000000"},
	{"hdr_size 121", "03 00 0000 00 00 79 00 1000000000000000"},
	{"hdr_size 255", "03 00 0000 00 00 ff 00 1000000000000000"},
	{"hdr_size 24 without flags", "03 00 0000 00 00 18 00 1800000000000000 0000000000000000"},
	{"cq data flag with hdr 16", "03 00 0100 00 00 10 00 1000000000000000"},
	{"tagged flag with hdr 16", "03 00 8000 00 00 10 00 1000000000000000"},
	{"op tagged with hdr 16", "03 01 0000 00 00 10 00 1000000000000000"},
	{"size < hdr_size", "03 00 0000 00 00 10 00 0f00000000000000"},
	{"size 0", "03 00 0000 00 00 10 00 0000000000000000"},
	{"size < hdr_size with data", "03 00 0100 00 00 18 00 1000000000000000 0000000000000000"},
	{"header cut", "03 00 0100 00 00 18 00 1800000000000000 00000000"},
	{"unknown flag 0x2", "03 00 0200 00 00 10 00 1000000000000000"},
	{"unknown flag 0x100", "03 00 0001 00 00 10 00 1000000000000000"},
	{"op_data 1", "03 00 0000 01 00 10 00 1000000000000000"},
	{"op_data ack on write", "03 04 0000 02 00 10 00 1000000000000000"},
	{"ack with payload", "03 00 0000 02 00 10 00 1100000000000000"},
	{"ack with hdr 24", "03 00 0100 02 00 18 00 1800000000000000 0000000000000000"},
	{"write 5 iovs", "03 04 0000 00 05 88 00 8800000000000000"},
	{"read 5 iovs", "03 02 0000 00 05 88 00 8800000000000000"},
	{"write hdr for 2 iovs, count 1", "03 04 0000 00 01 40 00 4000000000000000" + strings.Repeat("00", 48)},
	{"write length mismatch", "03 04 0000 00 01 28 00 3000000000000000 0000000000000000 1000000000000000 0000000000000000"},
	{"write descriptor overflow", "03 04 0000 00 02 40 00 4000000000000000" +
		"0000000000000000 ffffffffffffffff 0000000000000000" +
		"0000000000000000 0200000000000000 0000000000000000"},
	{"read request with payload", "03 02 0000 00 01 28 00 2900000000000000 0000000000000000 0100000000000000 0000000000000000"},
	{"read request with cq data", "03 02 0100 00 01 30 00 3000000000000000 0000000000000000 0000000000000000 0100000000000000 0000000000000000"},
	{"write tagged", "03 04 8000 00 00 18 00 1800000000000000 0000000000000000"},
	{"read response tagged", "03 03 8000 00 00 10 00 1000000000000000"},
}

func TestHeaderDecodeErrors(t *testing.T) {
	for _, tt := range badHeaderTests {
		b := testhex.Bytes(t, tt.wire)
		var h Header
		if n, err := h.Decode(b); err == nil {
			t.Errorf("%s: Decode(%x) = %+v, %d; want error", tt.name, b, h, n)
		}
	}
}

func TestHeaderEncodeErrors(t *testing.T) {
	bad := []Header{
		{Op: 5},
		{Op: OpMsg, OpData: 1},
		{Op: OpMsg, Flags: 0x2},
		{Op: OpWrite, RMACount: 5},
		{Op: OpWrite, RMACount: 1, RMA: [4]RMAIov{{Len: 3}}, Len: 4},
		{Op: OpReadReq, RMACount: 1, Len: 1},
		{Op: OpMsg, Len: ^uint64(0)},
		{Op: OpMsg, OpData: OpDataAck, Len: 1},
	}
	for _, h := range bad {
		if b, err := AppendHeader(nil, &h); err == nil {
			t.Errorf("AppendHeader(%+v) = %x, want error", h, b)
		}
	}
	h := Header{Op: OpMsg, Flags: FlagRemoteCQData}
	if _, err := h.Encode(make([]byte, 20)); !errors.Is(err, ErrShort) {
		t.Errorf("Encode into 20 bytes = %v, want ErrShort", err)
	}
}

// TestHeaderSizes checks the largest and smallest sizes the format allows.
func TestHeaderSizes(t *testing.T) {
	h := Header{Op: OpMsg, Len: ^uint64(0) - BaseHeaderSize}
	b, err := AppendHeader(nil, &h)
	if err != nil {
		t.Fatalf("AppendHeader(max size) = %v", err)
	}
	var d Header
	if _, err := d.Decode(b); err != nil || d.Len != h.Len {
		t.Errorf("Decode(max size) = %+v, %v", d, err)
	}
}
