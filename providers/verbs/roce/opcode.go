package roce

import "fmt"

// Opcode is the BTH opcode: the transport in its top 3 bits (RC 0x00, UC
// 0x20, RD 0x40, UD 0x60) and the operation in the low 5. The names are
// include/rdma/ib_pack.h's IB_OPCODE_* in Go style.
type Opcode uint8

// Reliable Connected (RC) opcodes.
const (
	RCSendFirst                  Opcode = 0x00
	RCSendMiddle                 Opcode = 0x01
	RCSendLast                   Opcode = 0x02
	RCSendLastWithImmediate      Opcode = 0x03
	RCSendOnly                   Opcode = 0x04
	RCSendOnlyWithImmediate      Opcode = 0x05
	RCRDMAWriteFirst             Opcode = 0x06
	RCRDMAWriteMiddle            Opcode = 0x07
	RCRDMAWriteLast              Opcode = 0x08
	RCRDMAWriteLastWithImmediate Opcode = 0x09
	RCRDMAWriteOnly              Opcode = 0x0a
	RCRDMAWriteOnlyWithImmediate Opcode = 0x0b
	RCRDMAReadRequest            Opcode = 0x0c
	RCRDMAReadResponseFirst      Opcode = 0x0d
	RCRDMAReadResponseMiddle     Opcode = 0x0e
	RCRDMAReadResponseLast       Opcode = 0x0f
	RCRDMAReadResponseOnly       Opcode = 0x10
	RCAcknowledge                Opcode = 0x11
	RCAtomicAcknowledge          Opcode = 0x12
	RCCompareSwap                Opcode = 0x13
	RCFetchAdd                   Opcode = 0x14
)

// Unreliable Datagram (UD) opcodes.
const (
	UDSendOnly              Opcode = 0x64
	UDSendOnlyWithImmediate Opcode = 0x65
)

// Headers is a set of the extension headers and parts that follow the BTH.
type Headers uint8

const (
	HasDETH         Headers = 1 << iota // Datagram ETH: Q_Key, source QP (UD)
	HasRETH                             // RDMA ETH: virtual address, R_Key, DMA length
	HasAtomicETH                        // Atomic ETH: virtual address, R_Key, swap/add and compare data
	HasAETH                             // ACK ETH: syndrome, MSN
	HasAtomicAckETH                     // Atomic ACK ETH: the original remote data
	HasImmDt                            // immediate data
	HasPayload                          // a payload of 0 bytes or more may follow the headers
)

// Header sizes in bytes.
const (
	BTHSize          = 12
	DETHSize         = 8
	RETHSize         = 16
	AtomicETHSize    = 28
	AETHSize         = 4
	AtomicAckETHSize = 8
	ImmDtSize        = 4
	ICRCSize         = 4
)

type opcodeInfo struct {
	name    string
	headers Headers
}

// opcodes is what each known opcode carries after its BTH (the IB
// specification's packet formats; rxe_opcode.c keeps the same table).
var opcodes = [256]opcodeInfo{
	RCSendFirst:                  {"RC_SEND_FIRST", HasPayload},
	RCSendMiddle:                 {"RC_SEND_MIDDLE", HasPayload},
	RCSendLast:                   {"RC_SEND_LAST", HasPayload},
	RCSendLastWithImmediate:      {"RC_SEND_LAST_WITH_IMMEDIATE", HasImmDt | HasPayload},
	RCSendOnly:                   {"RC_SEND_ONLY", HasPayload},
	RCSendOnlyWithImmediate:      {"RC_SEND_ONLY_WITH_IMMEDIATE", HasImmDt | HasPayload},
	RCRDMAWriteFirst:             {"RC_RDMA_WRITE_FIRST", HasRETH | HasPayload},
	RCRDMAWriteMiddle:            {"RC_RDMA_WRITE_MIDDLE", HasPayload},
	RCRDMAWriteLast:              {"RC_RDMA_WRITE_LAST", HasPayload},
	RCRDMAWriteLastWithImmediate: {"RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", HasImmDt | HasPayload},
	RCRDMAWriteOnly:              {"RC_RDMA_WRITE_ONLY", HasRETH | HasPayload},
	RCRDMAWriteOnlyWithImmediate: {"RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", HasRETH | HasImmDt | HasPayload},
	RCRDMAReadRequest:            {"RC_RDMA_READ_REQUEST", HasRETH},
	RCRDMAReadResponseFirst:      {"RC_RDMA_READ_RESPONSE_FIRST", HasAETH | HasPayload},
	RCRDMAReadResponseMiddle:     {"RC_RDMA_READ_RESPONSE_MIDDLE", HasPayload},
	RCRDMAReadResponseLast:       {"RC_RDMA_READ_RESPONSE_LAST", HasAETH | HasPayload},
	RCRDMAReadResponseOnly:       {"RC_RDMA_READ_RESPONSE_ONLY", HasAETH | HasPayload},
	RCAcknowledge:                {"RC_ACKNOWLEDGE", HasAETH},
	RCAtomicAcknowledge:          {"RC_ATOMIC_ACKNOWLEDGE", HasAETH | HasAtomicAckETH},
	RCCompareSwap:                {"RC_COMPARE_SWAP", HasAtomicETH},
	RCFetchAdd:                   {"RC_FETCH_ADD", HasAtomicETH},
	UDSendOnly:                   {"UD_SEND_ONLY", HasDETH | HasPayload},
	UDSendOnlyWithImmediate:      {"UD_SEND_ONLY_WITH_IMMEDIATE", HasDETH | HasImmDt | HasPayload},
}

// Headers returns what follows the BTH of a packet with opcode o, and
// whether o is an opcode this package knows.
func (o Opcode) Headers() (Headers, bool) {
	info := opcodes[o]
	return info.headers, info.name != ""
}

// HeaderSize is the length of the BTH and extension headers of opcode o,
// or 0 for an unknown opcode.
func (o Opcode) HeaderSize() int {
	h, ok := o.Headers()
	if !ok {
		return 0
	}
	return h.size()
}

func (h Headers) size() int {
	n := BTHSize
	for _, e := range [...]struct {
		bit  Headers
		size int
	}{
		{HasDETH, DETHSize}, {HasRETH, RETHSize}, {HasAtomicETH, AtomicETHSize},
		{HasAETH, AETHSize}, {HasAtomicAckETH, AtomicAckETHSize}, {HasImmDt, ImmDtSize},
	} {
		if h&e.bit != 0 {
			n += e.size
		}
	}
	return n
}

// String returns the opcode's ib_pack.h name without IB_OPCODE_, such as
// RC_SEND_FIRST, or its number for an unknown opcode.
func (o Opcode) String() string {
	if name := opcodes[o].name; name != "" {
		return name
	}
	return fmt.Sprintf("opcode(%#02x)", uint8(o))
}
