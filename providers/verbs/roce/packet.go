package roce

import (
	"encoding/binary"
	"fmt"
)

// MaxPayload is the most payload one packet carries: the largest IB path
// MTU. A QP's own MTU (256..4096) is its business, not the codec's.
const MaxPayload = 4096

// MaxPacketSize is the longest UDP payload Encode writes: the largest
// header set (BTH, RETH, ImmDt) with MaxPayload bytes and the ICRC.
const MaxPacketSize = BTHSize + RETHSize + ImmDtSize + MaxPayload + ICRCSize

// A Packet is one RoCEv2 packet: the BTH, the extension headers, the
// payload. Only the headers the opcode carries (Opcode.Headers) are
// meaningful; Encode refuses a packet that sets any other, so that a value
// and its decoding compare equal.
type Packet struct {
	BTH
	DETH      DETH
	RETH      RETH
	AtomicETH AtomicETH
	AETH      AETH
	AtomicAck uint64 // AtomicAckETH: the original remote data
	ImmDt     uint32 // immediate data, big-endian on the wire
	Payload   []byte
}

// Size is the length of the packet on the wire: headers, payload, pad and
// ICRC (the UDP payload). It is meaningful only for a packet that Encode
// accepts.
func (p *Packet) Size() int {
	return p.Opcode.HeaderSize() + len(p.Payload) + PadCount(len(p.Payload)) + ICRCSize
}

// Validate checks that p is a packet Encode can write: a known opcode,
// fields within their widths, a valid AETH syndrome, a payload only where
// the opcode has one and no longer than MaxPayload, and zero values in
// every header the opcode does not carry.
func (p *Packet) Validate() error {
	h, ok := p.Opcode.Headers()
	if !ok {
		return errorf("unknown opcode %#02x", uint8(p.Opcode))
	}
	if err := p.BTH.check(); err != nil {
		return errorf("%v: %v", p.Opcode, err)
	}
	if h&HasDETH != 0 && p.DETH.SrcQP > QPNMask {
		return errorf("%v: SrcQP %#x wider than 24 bits", p.Opcode, p.DETH.SrcQP)
	}
	if h&HasAETH != 0 {
		if err := p.AETH.check(); err != nil {
			return errorf("%v: %v", p.Opcode, err)
		}
	}
	for _, f := range [...]struct {
		bit  Headers
		zero bool
		name string
	}{
		{HasDETH, p.DETH == DETH{}, "DETH"},
		{HasRETH, p.RETH == RETH{}, "RETH"},
		{HasAtomicETH, p.AtomicETH == AtomicETH{}, "AtomicETH"},
		{HasAETH, p.AETH == AETH{}, "AETH"},
		{HasAtomicAckETH, p.AtomicAck == 0, "AtomicAckETH"},
		{HasImmDt, p.ImmDt == 0, "ImmDt"},
		{HasPayload, len(p.Payload) == 0, "payload"},
	} {
		if h&f.bit == 0 && !f.zero {
			return errorf("%v carries no %s", p.Opcode, f.name)
		}
	}
	if len(p.Payload) > MaxPayload {
		return errorf("%v: %d-byte payload, at most %d", p.Opcode, len(p.Payload), MaxPayload)
	}
	return nil
}

// Encode validates p and writes it into b as the UDP payload of a datagram
// sent over path: headers, payload, zero pad bytes and the ICRC. It returns
// the number of bytes written, p.Size(). It does not allocate.
func (p *Packet) Encode(b []byte, path Path) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	n := p.Size()
	if len(b) < n {
		return 0, errorf("%v: %d-byte buffer for a %d-byte packet", p.Opcode, len(b), n)
	}
	h, _ := p.Opcode.Headers()
	pad := PadCount(len(p.Payload))
	p.BTH.put(b, pad)
	off := BTHSize
	if h&HasDETH != 0 {
		p.DETH.put(b[off:])
		off += DETHSize
	}
	if h&HasRETH != 0 {
		p.RETH.put(b[off:])
		off += RETHSize
	}
	if h&HasAtomicETH != 0 {
		p.AtomicETH.put(b[off:])
		off += AtomicETHSize
	}
	if h&HasAETH != 0 {
		p.AETH.put(b[off:])
		off += AETHSize
	}
	if h&HasAtomicAckETH != 0 {
		binary.BigEndian.PutUint64(b[off:], p.AtomicAck)
		off += AtomicAckETHSize
	}
	if h&HasImmDt != 0 {
		binary.BigEndian.PutUint32(b[off:], p.ImmDt)
		off += ImmDtSize
	}
	off += copy(b[off:], p.Payload)
	clear(b[off : off+pad])
	off += pad
	crc, err := ICRC(path, b[:off])
	if err != nil {
		return 0, err
	}
	binary.LittleEndian.PutUint32(b[off:], crc)
	return n, nil
}

// Decode decodes and checks b, the UDP payload of a datagram received over
// path, into p. It checks that the opcode is known, that b is as long as
// the opcode's headers, the pad count and the ICRC call for and a multiple
// of 4 bytes, that TVer is 0, that an opcode without payload has neither
// payload nor pad, that the AETH syndrome is defined, and the ICRC. The
// payload aliases b (nil when empty). On error p is left unchanged.
func (p *Packet) Decode(b []byte, path Path) error {
	if len(b) < BTHSize+ICRCSize {
		return errorf("%d-byte packet, shorter than a BTH and an ICRC", len(b))
	}
	var q Packet
	pad, tver := q.BTH.get(b)
	if tver != TVer {
		return errorf("%v: transport version %d, want %d", q.Opcode, tver, TVer)
	}
	h, ok := q.Opcode.Headers()
	if !ok {
		return errorf("unknown opcode %#02x", uint8(q.Opcode))
	}
	hs := h.size()
	if len(b) < hs+ICRCSize {
		return errorf("%v: %d-byte packet, headers and ICRC take %d", q.Opcode, len(b), hs+ICRCSize)
	}
	if len(b)%4 != 0 {
		return errorf("%v: %d-byte packet, not a multiple of 4", q.Opcode, len(b))
	}
	rest := len(b) - hs - ICRCSize // payload and pad
	if h&HasPayload == 0 && rest != 0 {
		return errorf("%v: %d bytes after the headers, want none", q.Opcode, rest)
	}
	if pad > rest {
		return errorf("%v: pad count %d with %d bytes after the headers", q.Opcode, pad, rest)
	}
	if rest-pad > MaxPayload {
		return errorf("%v: %d-byte payload, at most %d", q.Opcode, rest-pad, MaxPayload)
	}
	off := BTHSize
	if h&HasDETH != 0 {
		q.DETH.get(b[off:])
		off += DETHSize
	}
	if h&HasRETH != 0 {
		q.RETH.get(b[off:])
		off += RETHSize
	}
	if h&HasAtomicETH != 0 {
		q.AtomicETH.get(b[off:])
		off += AtomicETHSize
	}
	if h&HasAETH != 0 {
		q.AETH.get(b[off:])
		if err := q.AETH.check(); err != nil {
			return errorf("%v: %v", q.Opcode, err)
		}
		off += AETHSize
	}
	if h&HasAtomicAckETH != 0 {
		q.AtomicAck = binary.BigEndian.Uint64(b[off:])
		off += AtomicAckETHSize
	}
	if h&HasImmDt != 0 {
		q.ImmDt = binary.BigEndian.Uint32(b[off:])
		off += ImmDtSize
	}
	if n := rest - pad; n > 0 {
		q.Payload = b[off : off+n : off+n]
	}
	if err := CheckICRC(path, b); err != nil {
		return fmt.Errorf("%w (%v PSN %#06x)", err, q.Opcode, q.PSN)
	}
	*p = q
	return nil
}

func errorf(format string, a ...any) error {
	return fmt.Errorf("roce: "+format, a...)
}
