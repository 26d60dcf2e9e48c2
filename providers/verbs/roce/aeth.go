package roce

import (
	"encoding/binary"
	"fmt"
)

// AETH is the ACK Extended Transport Header, 4 bytes: Syndrome(8),
// MSN(24). It is in ACKs, atomic ACKs and read responses (FIRST, LAST,
// ONLY).
type AETH struct {
	Syndrome Syndrome
	MSN      uint32 // message sequence number, 24 bits
}

// MSNMask keeps the 24 bits of an MSN.
const MSNMask = 1<<24 - 1

// Syndrome is the AETH syndrome: bit 7 reserved, bits 6-5 the kind, bits
// 4-0 its value (credits, RNR timer code or NAK code). The names are
// rxe_hdr.h's enum aeth_syndrome in Go style.
type Syndrome uint8

const (
	AETHTypeMask Syndrome = 0xe0 // the reserved bit and the kind
	AETHValMask  Syndrome = 0x1f // the value

	AETHAck    Syndrome = 0x00 // ACK; the value is the credit count
	AETHRNRNAK Syndrome = 0x20 // receiver not ready; the value is an RNR timer code
	AETHRsvd   Syndrome = 0x40 // reserved kind
	AETHNAK    Syndrome = 0x60 // NAK; the value is a NAK code

	AETHAckUnlimited Syndrome = 0x1f // ACK with the credit field "invalid": no end-to-end flow control

	AETHNAKPSNSeqError Syndrome = 0x60 // PSN sequence error: resend from the MSN'd PSN
	AETHNAKInvalidReq  Syndrome = 0x61 // invalid request
	AETHNAKRemAccErr   Syndrome = 0x62 // remote access error
	AETHNAKRemOpErr    Syndrome = 0x63 // remote operational error
	AETHNAKInvRDReq    Syndrome = 0x64 // invalid RD request
)

// AckSyndrome is the syndrome of an ACK carrying credits (0..30, or
// AETHAckUnlimited).
func AckSyndrome(credits uint8) Syndrome { return AETHAck | Syndrome(credits)&AETHValMask }

// RNRNAKSyndrome is the syndrome of an RNR NAK asking to wait the time of
// RNR timer code (see RNRTimer).
func RNRNAKSyndrome(code uint8) Syndrome { return AETHRNRNAK | Syndrome(code)&AETHValMask }

// Kind is the syndrome's kind: AETHAck, AETHRNRNAK or AETHNAK (or a
// reserved value Valid rejects).
func (s Syndrome) Kind() Syndrome { return s & AETHTypeMask }

// Value is the syndrome's low 5 bits: the credit count of an ACK, the
// timer code of an RNR NAK, the code of a NAK.
func (s Syndrome) Value() uint8 { return uint8(s & AETHValMask) }

// Valid reports whether s is a syndrome the IB specification defines.
func (s Syndrome) Valid() bool {
	switch s.Kind() {
	case AETHAck, AETHRNRNAK:
		return true
	case AETHNAK:
		return s <= AETHNAKInvRDReq
	}
	return false
}

func (s Syndrome) String() string {
	switch {
	case !s.Valid():
		return fmt.Sprintf("syndrome(%#02x)", uint8(s))
	case s == AETHAckUnlimited:
		return "ACK credits=unlimited"
	case s.Kind() == AETHAck:
		return fmt.Sprintf("ACK credits=%d", s.Value())
	case s.Kind() == AETHRNRNAK:
		return fmt.Sprintf("RNR NAK timer=%d", s.Value())
	}
	return [...]string{"NAK PSN sequence error", "NAK invalid request", "NAK remote access error",
		"NAK remote operational error", "NAK invalid RD request"}[s.Value()]
}

func (h *AETH) put(b []byte) {
	binary.BigEndian.PutUint32(b, h.MSN&MSNMask)
	b[0] = byte(h.Syndrome)
}

func (h *AETH) get(b []byte) {
	h.Syndrome = Syndrome(b[0])
	h.MSN = binary.BigEndian.Uint32(b) & MSNMask
}

func (h *AETH) check() error {
	if !h.Syndrome.Valid() {
		return fmt.Errorf("reserved AETH syndrome %#02x", uint8(h.Syndrome))
	}
	if h.MSN > MSNMask {
		return fmt.Errorf("MSN %#x wider than 24 bits", h.MSN)
	}
	return nil
}
