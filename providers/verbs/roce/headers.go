package roce

import (
	"encoding/binary"
	"fmt"
)

// BTH is the Base Transport Header, 12 bytes:
//
//	off bits field
//	0   8    opcode
//	1   1    SE: solicited event
//	    1    M: migration state
//	    2    PadCnt: pad bytes after the payload
//	    4    TVer: transport header version, 0
//	2   16   P_Key: partition key
//	4   1    FECN (the ICRC masks this byte)
//	    1    BECN
//	    6    reserved
//	5   24   DestQP: destination queue pair number
//	8   1    A: acknowledge request
//	    7    reserved
//	9   24   PSN: packet sequence number
//
// PadCnt and TVer are not fields here: Encode derives the pad from the
// payload's length and writes TVer 0; Decode checks both.
type BTH struct {
	Opcode Opcode
	SE     bool   // solicited event
	M      bool   // migration state
	PKey   uint16 // partition key; DefaultPKey unless configured
	FECN   bool   // forward explicit congestion notification
	BECN   bool   // backward explicit congestion notification
	DestQP uint32 // 24 bits
	AckReq bool   // the A bit: the responder must acknowledge this packet
	PSN    uint32 // 24 bits
}

// BTH constants.
const (
	TVer        = 0      // the only transport header version
	DefaultPKey = 0xffff // the default partition's full-member key
	QPNMask     = 1<<24 - 1
	PSNMask     = 1<<24 - 1
	PadMask     = 3
)

const (
	bthSE   = 0x80 // byte 1
	bthM    = 0x40
	bthFECN = 0x80 // byte 4
	bthBECN = 0x40
	bthA    = 0x80 // byte 8
)

// PadCount is the number of pad bytes after a payload of n bytes: what
// brings it to a multiple of 4.
func PadCount(n int) int { return -n & PadMask }

func (h *BTH) put(b []byte, pad int) {
	b[0] = byte(h.Opcode)
	b[1] = flag(h.SE, bthSE) | flag(h.M, bthM) | byte(pad)<<4 | TVer
	binary.BigEndian.PutUint16(b[2:], h.PKey)
	binary.BigEndian.PutUint32(b[4:], h.DestQP&QPNMask)
	b[4] = flag(h.FECN, bthFECN) | flag(h.BECN, bthBECN)
	binary.BigEndian.PutUint32(b[8:], h.PSN&PSNMask)
	b[8] = flag(h.AckReq, bthA)
}

// get decodes the BTH at the start of b (at least BTHSize bytes) and
// returns its pad count and transport version.
func (h *BTH) get(b []byte) (pad, tver int) {
	*h = BTH{
		Opcode: Opcode(b[0]),
		SE:     b[1]&bthSE != 0,
		M:      b[1]&bthM != 0,
		PKey:   binary.BigEndian.Uint16(b[2:]),
		FECN:   b[4]&bthFECN != 0,
		BECN:   b[4]&bthBECN != 0,
		DestQP: binary.BigEndian.Uint32(b[4:]) & QPNMask,
		AckReq: b[8]&bthA != 0,
		PSN:    binary.BigEndian.Uint32(b[8:]) & PSNMask,
	}
	return int(b[1]>>4) & PadMask, int(b[1] & 0x0f)
}

func (h *BTH) check() error {
	if h.DestQP > QPNMask {
		return fmt.Errorf("DestQP %#x wider than 24 bits", h.DestQP)
	}
	if h.PSN > PSNMask {
		return fmt.Errorf("PSN %#x wider than 24 bits", h.PSN)
	}
	return nil
}

func flag(v bool, bit byte) byte {
	if v {
		return bit
	}
	return 0
}

// DETH is the Datagram Extended Transport Header of UD packets, 8 bytes:
// Q_Key(32), reserved(8), SrcQP(24).
type DETH struct {
	QKey  uint32
	SrcQP uint32 // 24 bits
}

func (h *DETH) put(b []byte) {
	binary.BigEndian.PutUint32(b, h.QKey)
	binary.BigEndian.PutUint32(b[4:], h.SrcQP&QPNMask)
}

func (h *DETH) get(b []byte) {
	h.QKey = binary.BigEndian.Uint32(b)
	h.SrcQP = binary.BigEndian.Uint32(b[4:]) & QPNMask
}

// RETH is the RDMA Extended Transport Header, 16 bytes: VA(64), R_Key(32),
// DMA length(32). It starts an RDMA write (FIRST, ONLY) and is the whole
// of a read request.
type RETH struct {
	VA     uint64 // remote virtual address
	RKey   uint32
	DMALen uint32 // bytes of the whole write or read
}

func (h *RETH) put(b []byte) {
	binary.BigEndian.PutUint64(b, h.VA)
	binary.BigEndian.PutUint32(b[8:], h.RKey)
	binary.BigEndian.PutUint32(b[12:], h.DMALen)
}

func (h *RETH) get(b []byte) {
	h.VA = binary.BigEndian.Uint64(b)
	h.RKey = binary.BigEndian.Uint32(b[8:])
	h.DMALen = binary.BigEndian.Uint32(b[12:])
}

// AtomicETH is the Atomic Extended Transport Header, 28 bytes: VA(64),
// R_Key(32), Swap/Add data(64), Compare data(64), in that order.
type AtomicETH struct {
	VA      uint64 // remote virtual address of the 8-byte operand
	RKey    uint32
	SwapAdd uint64 // the value to swap in (CMP_SWAP) or to add (FETCH_ADD)
	Compare uint64 // the value to compare with (CMP_SWAP)
}

func (h *AtomicETH) put(b []byte) {
	binary.BigEndian.PutUint64(b, h.VA)
	binary.BigEndian.PutUint32(b[8:], h.RKey)
	binary.BigEndian.PutUint64(b[12:], h.SwapAdd)
	binary.BigEndian.PutUint64(b[20:], h.Compare)
}

func (h *AtomicETH) get(b []byte) {
	h.VA = binary.BigEndian.Uint64(b)
	h.RKey = binary.BigEndian.Uint32(b[8:])
	h.SwapAdd = binary.BigEndian.Uint64(b[12:])
	h.Compare = binary.BigEndian.Uint64(b[20:])
}
