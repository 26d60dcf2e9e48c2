package roce

import (
	"reflect"
	"testing"

	"github.com/fabricfs/fabricfs/internal/testhex"
)

// FuzzDecode checks that Decode never panics, over IPv4 and IPv6, and
// that a packet it accepts encodes to a packet of the same length that
// decodes to the same value. Each input is tried twice: as it is (its ICRC
// is almost always wrong) and with its ICRC made right, so that the fuzzer
// reaches the format checks.
func FuzzDecode(f *testing.F) {
	for _, tt := range packetTests {
		b := make([]byte, tt.p.Size())
		if _, err := tt.p.Encode(b, pathV4); err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	for _, tt := range badPackets {
		f.Add(append(testhex.Bytes(f, tt.wire), 0, 0, 0, 0), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		path := pathV4
		if v6 {
			path = pathV6
		}
		var p Packet
		decodeRoundTrip(t, &p, b, path)
		if len(b) >= BTHSize+ICRCSize {
			n := len(b) - ICRCSize
			crc, err := ICRC(path, b[:n])
			if err != nil {
				t.Fatalf("ICRC(%x): %v", b[:n], err)
			}
			b[n], b[n+1], b[n+2], b[n+3] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
			decodeRoundTrip(t, &p, b, path)
		}
	})
}

func decodeRoundTrip(t *testing.T, p *Packet, b []byte, path Path) {
	if err := p.Decode(b, path); err != nil {
		return
	}
	out := make([]byte, p.Size())
	n, err := p.Encode(out, path)
	if err != nil || n != len(b) {
		t.Fatalf("Decode(%x) = %+v; Encode = %d, %v; want %d bytes", b, p, n, err, len(b))
	}
	var q Packet
	if err := q.Decode(out, path); err != nil || !reflect.DeepEqual(&q, p) {
		t.Fatalf("Decode(%x) = %+v, re-encodes as %x, which decodes as %+v, %v", b, p, out, q, err)
	}
}

// FuzzEncode builds a packet of any opcode from fuzzed fields, keeping
// only the headers the opcode carries, and checks decode(encode(p)) == p
// for every packet Encode accepts, and that Encode accepts every packet
// whose fields fit.
func FuzzEncode(f *testing.F) {
	for _, tt := range packetTests {
		p := tt.p
		f.Add(uint8(p.Opcode), p.SE, p.AckReq, p.PKey, p.DestQP, p.PSN, p.RETH.VA, p.RETH.RKey, p.RETH.DMALen,
			p.AtomicETH.SwapAdd, p.AtomicETH.Compare, uint8(p.AETH.Syndrome), p.AETH.MSN, p.AtomicAck, p.ImmDt, p.DETH.SrcQP, p.Payload, false)
	}
	f.Fuzz(func(t *testing.T, op uint8, se, ack bool, pkey uint16, qp, psn uint32, va uint64, rkey, dmalen uint32,
		swap, compare uint64, syndrome uint8, msn uint32, atomicAck uint64, imm, srcQP uint32, payload []byte, v6 bool) {
		path := pathV4
		if v6 {
			path = pathV6
		}
		h, ok := Opcode(op).Headers()
		p := Packet{BTH: BTH{Opcode: Opcode(op), SE: se, M: ack && se, PKey: pkey, FECN: se, BECN: ack, DestQP: qp, AckReq: ack, PSN: psn}}
		if h&HasDETH != 0 {
			p.DETH = DETH{QKey: rkey ^ dmalen, SrcQP: srcQP}
		}
		if h&HasRETH != 0 {
			p.RETH = RETH{VA: va, RKey: rkey, DMALen: dmalen}
		}
		if h&HasAtomicETH != 0 {
			p.AtomicETH = AtomicETH{VA: va, RKey: rkey, SwapAdd: swap, Compare: compare}
		}
		if h&HasAETH != 0 {
			p.AETH = AETH{Syndrome: Syndrome(syndrome), MSN: msn}
		}
		if h&HasAtomicAckETH != 0 {
			p.AtomicAck = atomicAck
		}
		if h&HasImmDt != 0 {
			p.ImmDt = imm
		}
		if h&HasPayload != 0 && len(payload) > 0 {
			p.Payload = payload
		}
		fits := ok && qp <= QPNMask && psn <= PSNMask && (h&HasDETH == 0 || srcQP <= QPNMask) && len(p.Payload) <= MaxPayload &&
			(h&HasAETH == 0 || (Syndrome(syndrome).Valid() && msn <= MSNMask))
		b := make([]byte, MaxPacketSize)
		n, err := p.Encode(b, path)
		if (err == nil) != fits {
			t.Fatalf("Encode(%+v) = %v; fields fit: %v", p, err, fits)
		}
		if err != nil {
			return
		}
		var q Packet
		if err := q.Decode(b[:n], path); err != nil || !reflect.DeepEqual(q, p) {
			t.Fatalf("Decode(Encode(%+v) = %x) = %+v, %v", p, b[:n], q, err)
		}
	})
}
