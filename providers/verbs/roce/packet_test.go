package roce

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/internal/testhex"
)

var (
	pathV4 = Path{Src: netip.MustParseAddrPort("192.168.1.1:49152"), Dst: netip.MustParseAddrPort("192.168.1.2:4791")}
	pathV6 = Path{Src: netip.MustParseAddrPort("[fe80::1]:49153"), Dst: netip.MustParseAddrPort("[fe80::2]:4791")}
)

func bth(op Opcode, qp, psn uint32, ack bool) BTH {
	return BTH{Opcode: op, PKey: DefaultPKey, DestQP: qp, PSN: psn, AckReq: ack}
}

var abcd = []byte("abcd")

// packetTests has every opcode the package knows, and each BTH flag and
// pad count. wire is the packet without its ICRC, written field by field
// from the layouts in headers.go: BTH (opcode, SE|M|PadCnt|TVer, P_Key,
// FECN|BECN, DestQP, A, PSN), then the extension headers, payload and pad.
var packetTests = []struct {
	name string
	p    Packet
	wire string
}{
	{"send only", Packet{BTH: bth(RCSendOnly, 0x11, 1, true), Payload: abcd},
		"04 00 ffff 00 000011 80 000001 61626364"},
	{"send first, SE, M, pad 1", Packet{BTH: BTH{Opcode: RCSendFirst, SE: true, M: true, PKey: 0x8001, DestQP: 0xabcdef, PSN: 0xfffffe}, Payload: []byte("abc")},
		"00 d0 8001 00 abcdef 00 fffffe 616263 00"},
	{"send middle, FECN, BECN, pad 3", Packet{BTH: BTH{Opcode: RCSendMiddle, PKey: DefaultPKey, FECN: true, BECN: true, DestQP: 2, PSN: 0xffffff}, Payload: []byte("a")},
		"01 30 ffff c0 000002 00 ffffff 61 000000"},
	{"send last, pad 2", Packet{BTH: bth(RCSendLast, 2, 0, true), Payload: []byte("ab")},
		"02 20 ffff 00 000002 80 000000 6162 0000"},
	{"send last imm", Packet{BTH: bth(RCSendLastWithImmediate, 2, 5, true), ImmDt: 0xdeadbeef, Payload: abcd},
		"03 00 ffff 00 000002 80 000005 deadbeef 61626364"},
	{"send only imm, empty", Packet{BTH: bth(RCSendOnlyWithImmediate, 2, 6, true), ImmDt: 1},
		"05 00 ffff 00 000002 80 000006 00000001"},
	{"send only, empty", Packet{BTH: bth(RCSendOnly, 2, 7, true)},
		"04 00 ffff 00 000002 80 000007"},
	{"write first", Packet{BTH: bth(RCRDMAWriteFirst, 3, 0x10, false), RETH: RETH{VA: 0x7f0012345678, RKey: 0x1234ab, DMALen: 8192}, Payload: abcd},
		"06 00 ffff 00 000003 00 000010 00007f0012345678 001234ab 00002000 61626364"},
	{"write middle", Packet{BTH: bth(RCRDMAWriteMiddle, 3, 0x11, false), Payload: abcd},
		"07 00 ffff 00 000003 00 000011 61626364"},
	{"write last", Packet{BTH: bth(RCRDMAWriteLast, 3, 0x12, true), Payload: abcd},
		"08 00 ffff 00 000003 80 000012 61626364"},
	{"write last imm", Packet{BTH: bth(RCRDMAWriteLastWithImmediate, 3, 0x13, true), ImmDt: 0x01020304, Payload: abcd},
		"09 00 ffff 00 000003 80 000013 01020304 61626364"},
	{"write only", Packet{BTH: bth(RCRDMAWriteOnly, 3, 0x14, true), RETH: RETH{VA: 0x1000, RKey: 0x101, DMALen: 4}, Payload: abcd},
		"0a 00 ffff 00 000003 80 000014 0000000000001000 00000101 00000004 61626364"},
	{"write only imm, empty", Packet{BTH: bth(RCRDMAWriteOnlyWithImmediate, 3, 0x15, true), RETH: RETH{VA: 0x2000, RKey: 0x102}, ImmDt: 7},
		"0b 00 ffff 00 000003 80 000015 0000000000002000 00000102 00000000 00000007"},
	{"read request", Packet{BTH: bth(RCRDMAReadRequest, 3, 0x16, true), RETH: RETH{VA: 0x3000, RKey: 0x103, DMALen: 3000}},
		"0c 00 ffff 00 000003 80 000016 0000000000003000 00000103 00000bb8"},
	{"read response first", Packet{BTH: bth(RCRDMAReadResponseFirst, 4, 0x16, false), AETH: AETH{Syndrome: AETHAckUnlimited, MSN: 5}, Payload: abcd},
		"0d 00 ffff 00 000004 00 000016 1f000005 61626364"},
	{"read response middle", Packet{BTH: bth(RCRDMAReadResponseMiddle, 4, 0x17, false), Payload: abcd},
		"0e 00 ffff 00 000004 00 000017 61626364"},
	{"read response last", Packet{BTH: bth(RCRDMAReadResponseLast, 4, 0x18, false), AETH: AETH{Syndrome: AETHAckUnlimited, MSN: 5}, Payload: abcd},
		"0f 00 ffff 00 000004 00 000018 1f000005 61626364"},
	{"read response only, pad 1", Packet{BTH: bth(RCRDMAReadResponseOnly, 4, 0x19, false), AETH: AETH{Syndrome: AETHAckUnlimited, MSN: 6}, Payload: []byte("abc")},
		"10 10 ffff 00 000004 00 000019 1f000006 616263 00"},
	{"ack", Packet{BTH: bth(RCAcknowledge, 4, 0x1a, false), AETH: AETH{Syndrome: AckSyndrome(3), MSN: 7}},
		"11 00 ffff 00 000004 00 00001a 03000007"},
	{"rnr nak", Packet{BTH: bth(RCAcknowledge, 4, 0x1b, false), AETH: AETH{Syndrome: RNRNAKSyndrome(12), MSN: 7}},
		"11 00 ffff 00 000004 00 00001b 2c000007"},
	{"nak remote access", Packet{BTH: bth(RCAcknowledge, 4, 0x1c, false), AETH: AETH{Syndrome: AETHNAKRemAccErr, MSN: 0xffffff}},
		"11 00 ffff 00 000004 00 00001c 62ffffff"},
	{"atomic ack", Packet{BTH: bth(RCAtomicAcknowledge, 4, 0x1d, false), AETH: AETH{Syndrome: AETHAckUnlimited, MSN: 9}, AtomicAck: 0x0102030405060708},
		"12 00 ffff 00 000004 00 00001d 1f000009 0102030405060708"},
	{"compare swap", Packet{BTH: bth(RCCompareSwap, 3, 0x1e, true), AtomicETH: AtomicETH{VA: 0x4000, RKey: 0x104, SwapAdd: 0x1111111111111111, Compare: 0x2222222222222222}},
		"13 00 ffff 00 000003 80 00001e 0000000000004000 00000104 1111111111111111 2222222222222222"},
	{"fetch add", Packet{BTH: bth(RCFetchAdd, 3, 0x1f, true), AtomicETH: AtomicETH{VA: 0x4008, RKey: 0x104, SwapAdd: 1}},
		"14 00 ffff 00 000003 80 00001f 0000000000004008 00000104 0000000000000001 0000000000000000"},
	{"ud send only", Packet{BTH: bth(UDSendOnly, 5, 0x20, false), DETH: DETH{QKey: 0x11111111, SrcQP: 0x42}, Payload: abcd},
		"64 00 ffff 00 000005 00 000020 11111111 00000042 61626364"},
	{"ud send only imm, pad 2", Packet{BTH: bth(UDSendOnlyWithImmediate, 5, 0x21, false), DETH: DETH{QKey: 0x80010000, SrcQP: 0xffffff}, ImmDt: 0xcafe, Payload: []byte("ab")},
		"65 20 ffff 00 000005 00 000021 80010000 00ffffff 0000cafe 6162 0000"},
}

func TestEncodeDecode(t *testing.T) {
	seen := map[Opcode]bool{}
	for _, tt := range packetTests {
		seen[tt.p.Opcode] = true
		want := testhex.Bytes(t, tt.wire)
		for _, path := range []Path{pathV4, pathV6} {
			var b [MaxPacketSize]byte
			n, err := tt.p.Encode(b[:], path)
			if err != nil || n != len(want)+ICRCSize || n != tt.p.Size() || !bytes.Equal(b[:n-ICRCSize], want) {
				t.Errorf("%s: Encode = %d, %v, % x; want %d bytes, % x", tt.name, n, err, b[:n], len(want)+ICRCSize, want)
				continue
			}
			if err := CheckICRC(path, b[:n]); err != nil {
				t.Errorf("%s: CheckICRC(Encode) = %v", tt.name, err)
			}
			var got Packet
			if err := got.Decode(b[:n], path); err != nil || !reflect.DeepEqual(got, tt.p) {
				t.Errorf("%s: Decode(% x) = %+v, %v; want %+v", tt.name, b[:n], got, err, tt.p)
			}
		}
	}
	for o := range 256 {
		if _, ok := Opcode(o).Headers(); ok && !seen[Opcode(o)] {
			t.Errorf("no test packet for %v", Opcode(o))
		}
	}
}

// reseal replaces the last 4 bytes of b with the ICRC b's other bytes call
// for, so that a test reaches the checks before the ICRC's.
func reseal(t *testing.T, b []byte) []byte {
	t.Helper()
	n := len(b) - ICRCSize
	if n < BTHSize {
		return b
	}
	crc, err := ICRC(pathV4, b[:n])
	if err != nil {
		t.Fatalf("ICRC(% x): %v", b[:n], err)
	}
	b[n], b[n+1], b[n+2], b[n+3] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
	return b
}

var badPackets = []struct {
	name string
	wire string // without the ICRC, which reseal adds
}{
	{"no BTH", "04 00 ffff 00"},
	{"TVer 1", "04 01 ffff 00 000011 80 000001"},
	{"TVer 15", "04 0f ffff 00 000011 80 000001"},
	{"RC opcode 0x15", "15 00 ffff 00 000011 80 000001"},
	{"RC SEND_LAST_WITH_INVALIDATE", "16 00 ffff 00 000011 80 000001"},
	{"UC SEND_ONLY", "24 00 ffff 00 000011 80 000001"},
	{"RD SEND_ONLY", "44 00 ffff 00 000011 80 000001"},
	{"UD SEND_FIRST", "60 00 ffff 00 000011 80 000001"},
	{"CNP", "81 00 ffff 00 000011 80 000001 00000000000000000000000000000000"},
	{"odd length", "04 00 ffff 00 000011 80 000001 61"},
	{"pad without payload", "04 30 ffff 00 000011 80 000001"},
	{"ACK with payload", "11 00 ffff 00 000004 00 00001a 03000007 61626364"},
	{"ACK with pad", "11 10 ffff 00 000004 00 00001a 03000007"},
	{"ACK without AETH", "11 00 ffff 00 000004 00 00001a"},
	{"read request without DMA length", "0c 00 ffff 00 000003 80 000016 0000000000003000 00000103"},
	{"read request with payload", "0c 00 ffff 00 000003 80 000016 0000000000003000 00000103 00000bb8 61626364"},
	{"atomic ACK without data", "12 00 ffff 00 000004 00 00001d 1f000009"},
	{"short AtomicETH", "13 00 ffff 00 000003 80 00001e 0000000000004000 00000104 1111111111111111 22222222"},
	{"UD without DETH", "64 00 ffff 00 000005 00 000020 1111"},
	{"reserved syndrome kind", "11 00 ffff 00 000004 00 00001a 40000007"},
	{"syndrome bit 7", "11 00 ffff 00 000004 00 00001a 83000007"},
	{"reserved NAK code", "11 00 ffff 00 000004 00 00001a 65000007"},
	{"NAK code 0x1f", "11 00 ffff 00 000004 00 00001a 7f000007"},
	{"payload over 4096", "04 00 ffff 00 000011 80 000001" + strings.Repeat("61", MaxPayload+4)},
}

func TestDecodeErrors(t *testing.T) {
	for _, tt := range badPackets {
		b := reseal(t, append(testhex.Bytes(t, tt.wire), 0, 0, 0, 0))
		p := Packet{ImmDt: 42}
		if err := p.Decode(b, pathV4); err == nil || errors.Is(err, ErrICRC) {
			t.Errorf("%s: Decode(% x) = %v, want a format error", tt.name, b, err)
		}
		if p.ImmDt != 42 {
			t.Errorf("%s: Decode failed and changed its packet", tt.name)
		}
	}
	for _, n := range []int{0, 1, 12, 15} {
		var p Packet
		if err := p.Decode(make([]byte, n), pathV4); err == nil {
			t.Errorf("Decode(%d zero bytes) succeeded", n)
		}
	}
}

func TestDecodeICRCErrors(t *testing.T) {
	var b [MaxPacketSize]byte
	p := packetTests[0].p
	n, err := p.Encode(b[:], pathV4)
	if err != nil {
		t.Fatal(err)
	}
	var q Packet
	other := pathV4
	other.Src = netip.MustParseAddrPort("192.168.1.3:49152")
	for _, path := range []Path{pathV6, other, {Src: pathV4.Src, Dst: netip.MustParseAddrPort("192.168.1.2:4792")}} {
		if err := q.Decode(b[:n], path); !errors.Is(err, ErrICRC) {
			t.Errorf("Decode over %v of a packet sent over %v = %v, want %v", path, pathV4, err, ErrICRC)
		}
	}
	for i := range n {
		c := b
		c[i] ^= 0x01
		err := q.Decode(c[:n], pathV4)
		switch {
		case i == 4 && err != nil: // FECN, BECN and reserved bits: masked
			t.Errorf("Decode with byte 4 changed = %v, want nil", err)
		case i != 4 && err == nil:
			t.Errorf("Decode with byte %d changed succeeded", i)
		}
	}
	if err := q.Decode(b[:n], Path{Src: pathV4.Src, Dst: pathV6.Dst}); err == nil || errors.Is(err, ErrICRC) {
		t.Errorf("Decode over a mixed IPv4/IPv6 path = %v, want a path error", err)
	}
	if err := q.Decode(b[:n], Path{}); err == nil || errors.Is(err, ErrICRC) {
		t.Errorf("Decode over the zero path = %v, want a path error", err)
	}
}

var badEncodes = []struct {
	name string
	p    Packet
}{
	{"unknown opcode", Packet{BTH: bth(0x15, 1, 1, true)}},
	{"UC opcode", Packet{BTH: bth(0x24, 1, 1, true)}},
	{"25-bit QPN", Packet{BTH: bth(RCSendOnly, 1<<24, 1, true)}},
	{"25-bit PSN", Packet{BTH: bth(RCSendOnly, 1, 1<<24, true)}},
	{"25-bit MSN", Packet{BTH: bth(RCAcknowledge, 1, 1, false), AETH: AETH{MSN: 1 << 24}}},
	{"25-bit SrcQP", Packet{BTH: bth(UDSendOnly, 1, 1, false), DETH: DETH{SrcQP: 1 << 24}}},
	{"reserved syndrome", Packet{BTH: bth(RCAcknowledge, 1, 1, false), AETH: AETH{Syndrome: AETHRsvd}}},
	{"NAK 0x65", Packet{BTH: bth(RCAcknowledge, 1, 1, false), AETH: AETH{Syndrome: 0x65}}},
	{"send with ImmDt", Packet{BTH: bth(RCSendOnly, 1, 1, true), ImmDt: 1}},
	{"send with RETH", Packet{BTH: bth(RCSendOnly, 1, 1, true), RETH: RETH{RKey: 1}}},
	{"send with DETH", Packet{BTH: bth(RCSendOnly, 1, 1, true), DETH: DETH{QKey: 1}}},
	{"send with AETH", Packet{BTH: bth(RCSendOnly, 1, 1, true), AETH: AETH{MSN: 1}}},
	{"write middle with RETH", Packet{BTH: bth(RCRDMAWriteMiddle, 1, 1, true), RETH: RETH{VA: 1}}},
	{"read response middle with AETH", Packet{BTH: bth(RCRDMAReadResponseMiddle, 1, 1, false), AETH: AETH{Syndrome: AETHAckUnlimited}}},
	{"ACK with AtomicAck", Packet{BTH: bth(RCAcknowledge, 1, 1, false), AtomicAck: 1}},
	{"fetch add with RETH", Packet{BTH: bth(RCFetchAdd, 1, 1, false), RETH: RETH{DMALen: 8}}},
	{"read request with AtomicETH", Packet{BTH: bth(RCRDMAReadRequest, 1, 1, true), AtomicETH: AtomicETH{Compare: 1}}},
	{"ACK with payload", Packet{BTH: bth(RCAcknowledge, 1, 1, false), Payload: abcd}},
	{"read request with payload", Packet{BTH: bth(RCRDMAReadRequest, 1, 1, true), Payload: abcd}},
	{"payload over 4096", Packet{BTH: bth(RCSendOnly, 1, 1, true), Payload: make([]byte, MaxPayload+1)}},
}

func TestEncodeErrors(t *testing.T) {
	var b [2 * MaxPacketSize]byte
	for _, tt := range badEncodes {
		if n, err := tt.p.Encode(b[:], pathV4); err == nil {
			t.Errorf("%s: Encode(%+v) = %d bytes, want an error", tt.name, tt.p, n)
		}
	}
	p := packetTests[0].p
	if n, err := p.Encode(b[:p.Size()-1], pathV4); err == nil {
		t.Errorf("Encode into %d bytes of a %d-byte packet = %d, nil", p.Size()-1, p.Size(), n)
	}
	if n, err := p.Encode(b[:], Path{Src: pathV6.Src, Dst: pathV4.Dst}); err == nil {
		t.Errorf("Encode over a mixed path = %d, nil", n)
	}
}

func TestMaxPacket(t *testing.T) {
	p := Packet{BTH: bth(RCRDMAWriteOnlyWithImmediate, 1, 1, true), ImmDt: 1, Payload: make([]byte, MaxPayload)}
	var b [MaxPacketSize]byte
	if n, err := p.Encode(b[:], pathV6); err != nil || n != MaxPacketSize {
		t.Fatalf("Encode of the largest packet = %d, %v; want %d", n, err, MaxPacketSize)
	}
	for o := range 256 {
		if h, ok := Opcode(o).Headers(); ok && h.size() > BTHSize+RETHSize+ImmDtSize && h&HasPayload != 0 {
			t.Errorf("%v has %d header bytes, more than MaxPacketSize allows", Opcode(o), h.size())
		}
	}
}

func TestNoAllocs(t *testing.T) {
	var b [MaxPacketSize]byte
	var q Packet
	p := Packet{BTH: bth(RCRDMAWriteOnlyWithImmediate, 1, 1, true), RETH: RETH{VA: 1, RKey: 2, DMALen: 1000}, ImmDt: 1, Payload: make([]byte, 1000)}
	for _, path := range []Path{pathV4, pathV6} {
		allocs := testing.AllocsPerRun(100, func() {
			n, err := p.Encode(b[:], path)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Decode(b[:n], path); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("Encode and Decode over %v: %v allocations, want 0", path, allocs)
		}
	}
}

func TestOpcodeString(t *testing.T) {
	for _, tt := range []struct {
		o    Opcode
		want string
	}{
		{RCSendFirst, "RC_SEND_FIRST"},
		{RCRDMAWriteOnlyWithImmediate, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
		{RCFetchAdd, "RC_FETCH_ADD"},
		{UDSendOnlyWithImmediate, "UD_SEND_ONLY_WITH_IMMEDIATE"},
		{0x24, "opcode(0x24)"},
	} {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("Opcode(%#x).String() = %q, want %q", uint8(tt.o), got, tt.want)
		}
	}
}
