package roce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// Port is the UDP destination port of RoCEv2 (IANA "roce").
const Port = 4791

// IPv4 header values the ICRC covers and this package assumes: version 4
// with a 20-byte header, identification 0, the DF flag set and no fragment
// offset: what Linux sends from a UDP socket with IP_MTU_DISCOVER set to
// IP_PMTUDISC_DO (a connected socket would number its datagrams).
const (
	ipv4VersionIHL = 0x45
	ipv4ID         = 0
	ipv4FlagsDF    = 0x4000
	ipProtoUDP     = 17
	ipv4HeaderSize = 20
	ipv6HeaderSize = 40
	udpHeaderSize  = 8
)

// A Path is the addresses and ports of the UDP datagram a packet travels
// in, which the ICRC covers. Src and Dst must both be IPv4 (IPv4-mapped
// IPv6 addresses count as IPv4) or both IPv6.
type Path struct {
	Src, Dst netip.AddrPort
}

// ErrICRC means a packet's ICRC is not the one its bytes and path call for.
var ErrICRC = errors.New("roce: ICRC mismatch")

// ICRC computes the Invariant CRC of pkt, a packet from its BTH to its last
// pad byte (without the ICRC), sent over path. It is CRC-32 (IEEE 802.3,
// as hash/crc32's IEEE table) over, in order:
//
//   - eight 0xFF bytes, standing in for the InfiniBand LRH;
//   - the IP header with the fields routers change set to all ones: for
//     IPv4 the TOS, TTL and header checksum; for IPv6 the traffic class,
//     flow label and hop limit. Lengths, addresses, the protocol, and for
//     IPv4 the identification (0) and flags (DF) are covered as sent;
//   - the UDP header with the checksum set to 0xFFFF;
//   - the BTH with byte 4 (FECN, BECN, reserved) set to 0xFF;
//   - the rest of pkt as it is.
//
// The ICRC follows the pad on the wire, least significant byte first.
func ICRC(path Path, pkt []byte) (uint32, error) {
	if len(pkt) < BTHSize {
		return 0, fmt.Errorf("roce: ICRC of %d bytes, shorter than a BTH", len(pkt))
	}
	var hdr [ipv6HeaderSize + udpHeaderSize + BTHSize]byte
	n, err := path.putMaskedHeaders(hdr[:], len(pkt)+ICRCSize)
	if err != nil {
		return 0, err
	}
	copy(hdr[n:], pkt[:BTHSize])
	hdr[n+4] = 0xff
	n += BTHSize
	crc := crcUpdate(0, lrhOnes[:])
	crc = crcUpdate(crc, hdr[:n])
	return crc32.Update(crc, crc32.IEEETable, pkt[BTHSize:]), nil
}

var lrhOnes = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// crcUpdate is crc32.Update with the IEEE table, a byte at a time, for the
// few bytes on the stack that crc32.Update would move to the heap (it
// calls through a function variable).
func crcUpdate(crc uint32, b []byte) uint32 {
	crc = ^crc
	for _, c := range b {
		crc = crc32.IEEETable[byte(crc)^c] ^ crc>>8
	}
	return ^crc
}

// CheckICRC checks the ICRC at the end of a datagram's UDP payload b
// received over path.
func CheckICRC(path Path, b []byte) error {
	if len(b) < BTHSize+ICRCSize {
		return fmt.Errorf("roce: %d bytes, shorter than a BTH and an ICRC", len(b))
	}
	n := len(b) - ICRCSize
	want, err := ICRC(path, b[:n])
	if err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(b[n:]); got != want {
		return fmt.Errorf("%w: packet has %#08x, want %#08x", ErrICRC, got, want)
	}
	return nil
}

// putMaskedHeaders writes the IP and UDP headers of a datagram whose UDP
// payload is n bytes, masked for the ICRC, and returns their length.
func (p Path) putMaskedHeaders(b []byte, n int) (int, error) {
	src, dst := p.Src.Addr().Unmap(), p.Dst.Addr().Unmap()
	off := 0
	switch {
	case src.Is4() && dst.Is4():
		total := ipv4HeaderSize + udpHeaderSize + n
		if total > 0xffff {
			return 0, fmt.Errorf("roce: %d-byte IPv4 datagram", total)
		}
		b[0] = ipv4VersionIHL
		b[1] = 0xff // TOS
		binary.BigEndian.PutUint16(b[2:], uint16(total))
		binary.BigEndian.PutUint16(b[4:], ipv4ID)
		binary.BigEndian.PutUint16(b[6:], ipv4FlagsDF)
		b[8] = 0xff // TTL
		b[9] = ipProtoUDP
		binary.BigEndian.PutUint16(b[10:], 0xffff) // header checksum
		s, d := src.As4(), dst.As4()
		copy(b[12:], s[:])
		copy(b[16:], d[:])
		off = ipv4HeaderSize
	case src.Is6() && dst.Is6():
		if udpHeaderSize+n > 0xffff {
			return 0, fmt.Errorf("roce: %d-byte IPv6 payload", udpHeaderSize+n)
		}
		binary.BigEndian.PutUint32(b, 0x6fffffff) // version 6, traffic class and flow label
		binary.BigEndian.PutUint16(b[4:], uint16(udpHeaderSize+n))
		b[6] = ipProtoUDP
		b[7] = 0xff // hop limit
		s, d := src.As16(), dst.As16()
		copy(b[8:], s[:])
		copy(b[24:], d[:])
		off = ipv6HeaderSize
	default:
		return 0, fmt.Errorf("roce: path %v -> %v is not IPv4 or IPv6 at both ends", p.Src, p.Dst)
	}
	binary.BigEndian.PutUint16(b[off:], p.Src.Port())
	binary.BigEndian.PutUint16(b[off+2:], p.Dst.Port())
	binary.BigEndian.PutUint16(b[off+4:], uint16(udpHeaderSize+n))
	binary.BigEndian.PutUint16(b[off+6:], 0xffff) // checksum
	return off + udpHeaderSize, nil
}
