package roce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/internal/testhex"
	"github.com/fabricfs/fabricfs/internal/tshark"
)

// TestICRCByHand checks ICRC against CRC-32 over bytes written out by hand
// from the rules: an RC SEND_ONLY of "abcd" to QP 0x11, PSN 1, A set, from
// 192.168.1.1:49152 to 192.168.1.2:4791. The UDP payload is 12+4+4 = 20
// bytes, so UDP length 28 (0x1c) and IPv4 total length 48 (0x30). The
// expected value was computed with Python's zlib.crc32 over the same bytes.
func TestICRCByHand(t *testing.T) {
	masked := testhex.Bytes(t, `
		ffffffffffffffff
		45 ff 0030 0000 4000 ff 11 ffff c0a80101 c0a80102
		c000 12b7 001c ffff
		04 00 ffff ff 000011 80 000001
		61626364`)
	const want = 0xd959b621
	if got := crc32.ChecksumIEEE(masked); got != want {
		t.Fatalf("CRC-32 of the masked bytes = %#08x, want %#08x", got, want)
	}
	pkt := testhex.Bytes(t, "04 00 ffff 00 000011 80 000001 61626364")
	if got, err := ICRC(pathV4, pkt); got != want || err != nil {
		t.Errorf("ICRC = %#08x, %v; want %#08x", got, err, want)
	}
	// The same packet with FECN and BECN set, over the IPv4-mapped IPv6
	// form of the same addresses: nothing the ICRC covers changes.
	pkt[4] = 0xc0
	mapped := Path{
		Src: netip.AddrPortFrom(netip.AddrFrom16(pathV4.Src.Addr().As16()), pathV4.Src.Port()),
		Dst: netip.AddrPortFrom(netip.AddrFrom16(pathV4.Dst.Addr().As16()), pathV4.Dst.Port()),
	}
	if got, err := ICRC(mapped, pkt); got != want || err != nil {
		t.Errorf("ICRC with FECN, BECN over %v = %#08x, %v; want %#08x", mapped, got, err, want)
	}
	// As written on the wire: the ICRC's least significant byte first.
	var b [24]byte
	p := Packet{BTH: bth(RCSendOnly, 0x11, 1, true), Payload: abcd}
	if n, err := p.Encode(b[:], pathV4); err != nil || !bytes.Equal(b[n-4:n], []byte{0x21, 0xb6, 0x59, 0xd9}) {
		t.Errorf("Encode = % x, %v; want an ICRC of 21 b6 59 d9", b[:n], err)
	}
}

// TestICRCByHandIPv6 is TestICRCByHand over pathV6: version 6 with the
// traffic class and flow label all ones, payload length 28, next header
// 17, hop limit 0xff.
func TestICRCByHandIPv6(t *testing.T) {
	masked := testhex.Bytes(t, `
		ffffffffffffffff
		6fffffff 001c 11 ff
		fe800000000000000000000000000001
		fe800000000000000000000000000002
		c001 12b7 001c ffff
		04 00 ffff ff 000011 80 000001
		61626364`)
	pkt := testhex.Bytes(t, "04 00 ffff 00 000011 80 000001 61626364")
	want := crc32.ChecksumIEEE(masked)
	if got, err := ICRC(pathV6, pkt); got != want || err != nil {
		t.Errorf("ICRC = %#08x, %v; want %#08x", got, err, want)
	}
}

func TestCRCUpdate(t *testing.T) {
	b := make([]byte, 100)
	for i := range b {
		b[i] = byte(i * 7)
	}
	for _, n := range []int{0, 1, 8, 60, 100} {
		if got, want := crcUpdate(crcUpdate(0, b[:n/2]), b[n/2:n]), crc32.ChecksumIEEE(b[:n]); got != want {
			t.Errorf("crcUpdate over %d bytes = %#08x, want %#08x", n, got, want)
		}
	}
}

func TestICRCErrors(t *testing.T) {
	pkt := testhex.Bytes(t, "04 00 ffff 00 000011 80 000001 61626364")
	for _, tt := range []struct {
		name string
		path Path
		pkt  []byte
	}{
		{"short", pathV4, pkt[:11]},
		{"zero path", Path{}, pkt},
		{"IPv4 to IPv6", Path{Src: pathV4.Src, Dst: pathV6.Dst}, pkt},
		{"IPv6 to IPv4", Path{Src: pathV6.Src, Dst: pathV4.Dst}, pkt},
		{"IPv4 datagram over 64 KiB", pathV4, make([]byte, 0xffff-20-8-3)},
		{"IPv6 payload over 64 KiB", pathV6, make([]byte, 0xffff-8-3)},
	} {
		if crc, err := ICRC(tt.path, tt.pkt); err == nil {
			t.Errorf("%s: ICRC = %#08x, nil; want an error", tt.name, crc)
		}
	}
	if _, err := ICRC(pathV6, make([]byte, 0xffff-8-4)); err != nil {
		t.Errorf("ICRC of the largest IPv6 payload: %v", err)
	}
}

// ipDatagram wraps a packet in IP and UDP headers as a kernel might send
// them, with values in the fields the ICRC masks: IPv4 TOS 0x02, TTL 64, a
// real header checksum; IPv6 traffic class 0xb8, flow label 0x12345, hop
// limit 64; a UDP checksum of 0x1234.
func ipDatagram(path Path, pkt []byte) []byte {
	var b []byte
	udpLen := 8 + len(pkt)
	src, dst := path.Src.Addr().Unmap(), path.Dst.Addr().Unmap()
	if src.Is4() {
		b = binary.BigEndian.AppendUint16(b, 0x4502)
		b = binary.BigEndian.AppendUint16(b, uint16(20+udpLen))
		b = binary.BigEndian.AppendUint32(b, 0x00004000) // ID 0, DF
		b = append(b, 64, 17, 0, 0)
		b = append(b, src.AsSlice()...)
		b = append(b, dst.AsSlice()...)
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		sum = sum>>16 + sum&0xffff
		binary.BigEndian.PutUint16(b[10:], ^uint16(sum+sum>>16))
	} else {
		b = binary.BigEndian.AppendUint32(b, 6<<28|0xb8<<20|0x12345)
		b = binary.BigEndian.AppendUint16(b, uint16(udpLen))
		b = append(b, 17, 64)
		b = append(b, src.AsSlice()...)
		b = append(b, dst.AsSlice()...)
	}
	b = binary.BigEndian.AppendUint16(b, path.Src.Port())
	b = binary.BigEndian.AppendUint16(b, path.Dst.Port())
	b = binary.BigEndian.AppendUint16(b, uint16(udpLen))
	b = binary.BigEndian.AppendUint16(b, 0x1234)
	return append(b, pkt...)
}

// TestICRCPython checks every test packet, over IPv4 and IPv6, and random
// packets of every length up to 200 bytes, against icrc.py (package internal/tshark), which
// masks a whole IP datagram itself and runs zlib.crc32.
func TestICRCPython(t *testing.T) {
	var in strings.Builder
	var want []uint32
	add := func(path Path, pkt []byte) {
		crc, err := ICRC(path, pkt[:len(pkt)-ICRCSize])
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint32(pkt[len(pkt)-ICRCSize:], crc)
		fmt.Fprintf(&in, "%x\n", ipDatagram(path, pkt))
		want = append(want, crc)
	}
	for _, path := range []Path{pathV4, pathV6} {
		for _, tt := range packetTests {
			b := make([]byte, tt.p.Size())
			if _, err := tt.p.Encode(b, path); err != nil {
				t.Fatal(err)
			}
			add(path, b)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for n := BTHSize + ICRCSize; n <= 200; n++ {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			add(path, b)
		}
	}
	got := tshark.ICRC(t, in.String(), "hex")
	if len(got) != len(want) {
		t.Fatalf("icrc.py answered %d datagrams of %d", len(got), len(want))
	}
	for i, g := range got {
		if g[0] != want[i] || g[1] != want[i] {
			t.Errorf("datagram %d: icrc.py computed %#08x and read %#08x, Go computed %#08x", i, g[0], g[1], want[i])
		}
	}
}
