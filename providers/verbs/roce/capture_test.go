package roce

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/internal/tshark"
)

// TestTsharkCapture sends one packet of every opcode (packetTests) over
// real UDP sockets on loopback, IPv4 and IPv6, captures them with tshark,
// and checks that Wireshark's dissector reads each as InfiniBand with the
// fields that were encoded, that the receiving socket decodes each to the
// packet sent, and that icrc.py, computing the ICRC from the
// captured IP datagram as the kernel sent it, agrees with the ICRC on the
// wire and the one tshark shows. It needs tshark and root (to capture);
// without them it is skipped, unless CI is set (see package
// internal/tshark).
//
// The receivers listen on port 4791, where tshark dissects RoCEv2 by
// default; if that port is taken, on another one, which tshark.Fields
// tells tshark to decode as InfiniBand.
func TestTsharkCapture(t *testing.T) {
	tshark.NeedCapture(t)
	recv4, recv6, port := listenLoopback(t)
	send4 := dialUnconnected(t, "udp4", "127.0.0.1:0")
	send6 := dialUnconnected(t, "udp6", "[::1]:0")

	// Every test packet over IPv4, then over IPv6.
	type sent struct {
		p    Packet
		path Path
		wire []byte
	}
	var all []sent
	for _, c := range []struct{ send, recv *net.UDPConn }{{send4, recv4}, {send6, recv6}} {
		path := Path{Src: addrPort(c.send), Dst: addrPort(c.recv)}
		for _, tt := range packetTests {
			b := make([]byte, tt.p.Size())
			if _, err := tt.p.Encode(b, path); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			all = append(all, sent{tt.p, path, b})
		}
	}

	pcap := filepath.Join(t.TempDir(), "roce.pcap")
	capture := tshark.Start(t, fmt.Sprintf("udp port %d", port), len(all), pcap)
	for _, s := range all {
		conn := send4
		if s.path.Src.Addr().Is6() {
			conn = send6
		}
		if _, err := conn.WriteToUDPAddrPort(s.wire, s.path.Dst); err != nil {
			t.Fatalf("send %v: %v", s.p.Opcode, err)
		}
	}
	capture.Wait(t, 20*time.Second)

	// The receiving sockets decode what the kernel delivered.
	buf := make([]byte, MaxPacketSize)
	for i, s := range all {
		conn := recv4
		if s.path.Dst.Addr().Is6() {
			conn = recv6
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("receive packet %d: %v", i, err)
		}
		var p Packet
		if err := p.Decode(buf[:n], Path{Src: from, Dst: s.path.Dst}); err != nil || !reflect.DeepEqual(p, s.p) {
			t.Errorf("received packet %d from %v: Decode = %+v, %v; want %+v", i, from, p, err, s.p)
		}
	}

	// tshark's dissection of the capture.
	fields := []string{"frame.protocols", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
		"infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.a",
		"infiniband.bth.p_key",
		"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
		"infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.deth.q_key", "infiniband.deth.srcqp",
		"infiniband.immdt", "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
		"infiniband.atomicacketh.origremdt", "infiniband.invariant.crc"}
	rows := tshark.Fields(t, pcap, port, fields...)
	if len(rows) != len(all) {
		t.Fatalf("tshark read %d packets, %d were sent", len(rows), len(all))
	}
	icrcs := tshark.ICRC(t, "", "pcap", pcap)
	if len(icrcs) != len(all) {
		t.Fatalf("icrc.py read %d packets, %d were sent", len(icrcs), len(all))
	}
	for i, s := range all {
		got := rows[i]
		name := fmt.Sprintf("packet %d (%v over %v)", i, s.p.Opcode, s.path.Src.Addr())
		if p := got["frame.protocols"]; !strings.HasSuffix(p, ":udp:infiniband") && !strings.HasSuffix(p, ":udp:infiniband:data") {
			t.Errorf("%s: protocols %q, want ...:udp:infiniband (and :data for a payload)", name, p)
		}
		for f, want := range wantFields(&s.p) {
			if v, err := strconv.ParseUint(got[f], 0, 64); err != nil || v != want {
				t.Errorf("%s: tshark %s = %q, want %#x", name, f, got[f], want)
			}
		}
		if !equalBytes(got["infiniband.immdt"], s.p.ImmDt, s.p.Opcode) {
			t.Errorf("%s: tshark infiniband.immdt = %q, want %08x", name, got["infiniband.immdt"], s.p.ImmDt)
		}
		// The ICRC: Go's (on the wire), icrc.py's from the kernel's
		// datagram, and tshark's, which it reads as a big-endian number.
		n := len(s.wire) - ICRCSize
		onWire := uint32(s.wire[n]) | uint32(s.wire[n+1])<<8 | uint32(s.wire[n+2])<<16 | uint32(s.wire[n+3])<<24
		shown, err := strconv.ParseUint(got["infiniband.invariant.crc"], 0, 32)
		if err != nil {
			t.Errorf("%s: tshark infiniband.invariant.crc = %q", name, got["infiniband.invariant.crc"])
		}
		if icrcs[i][0] != onWire || icrcs[i][1] != onWire || swap32(uint32(shown)) != onWire {
			t.Errorf("%s: ICRC sent %#08x; icrc.py computed %#08x and read %#08x; tshark shows %#08x",
				name, onWire, icrcs[i][0], icrcs[i][1], shown)
		}
	}
}

// wantFields is what tshark must show for the numeric fields of p.
func wantFields(p *Packet) map[string]uint64 {
	h, _ := p.Opcode.Headers()
	f := map[string]uint64{
		"infiniband.bth.opcode": uint64(p.Opcode),
		"infiniband.bth.se":     bit(p.SE),
		"infiniband.bth.m":      bit(p.M),
		"infiniband.bth.padcnt": uint64(PadCount(len(p.Payload))),
		"infiniband.bth.tver":   TVer,
		"infiniband.bth.p_key":  uint64(p.PKey),
		"infiniband.bth.destqp": uint64(p.DestQP),
		"infiniband.bth.a":      bit(p.AckReq),
		"infiniband.bth.psn":    uint64(p.PSN),
	}
	if h&HasRETH != 0 {
		f["infiniband.reth.va"] = p.RETH.VA
		f["infiniband.reth.r_key"] = uint64(p.RETH.RKey)
		f["infiniband.reth.dmalen"] = uint64(p.RETH.DMALen)
	}
	if h&HasAETH != 0 {
		f["infiniband.aeth.syndrome"] = uint64(p.AETH.Syndrome)
		f["infiniband.aeth.msn"] = uint64(p.AETH.MSN)
	}
	if h&HasDETH != 0 {
		f["infiniband.deth.q_key"] = uint64(p.DETH.QKey)
		f["infiniband.deth.srcqp"] = uint64(p.DETH.SrcQP)
	}
	if h&HasAtomicETH != 0 {
		// Wireshark shows the AtomicETH's address and key as RETH fields.
		f["infiniband.reth.va"] = p.AtomicETH.VA
		f["infiniband.reth.r_key"] = uint64(p.AtomicETH.RKey)
		f["infiniband.atomiceth.swapdt"] = p.AtomicETH.SwapAdd
		f["infiniband.atomiceth.cmpdt"] = p.AtomicETH.Compare
	}
	if h&HasAtomicAckETH != 0 {
		f["infiniband.atomicacketh.origremdt"] = p.AtomicAck
	}
	return f
}

func bit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// equalBytes reports whether tshark's hex bytes field s is imm as 4
// big-endian bytes, or empty when the opcode carries no ImmDt.
func equalBytes(s string, imm uint32, o Opcode) bool {
	if h, _ := o.Headers(); h&HasImmDt == 0 {
		return s == ""
	}
	return strings.ReplaceAll(s, ":", "") == fmt.Sprintf("%08x", imm)
}

func swap32(v uint32) uint32 { return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24 }

func addrPort(c *net.UDPConn) netip.AddrPort {
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// listenLoopback opens UDP sockets on 127.0.0.1 and ::1 with the same
// port: 4791 if it is free, another one otherwise.
func listenLoopback(t *testing.T) (v4, v6 *net.UDPConn, port int) {
	for _, p := range []int{Port, 0, 0, 0, 0} {
		c4, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			continue
		}
		port := c4.LocalAddr().(*net.UDPAddr).Port
		c6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback, Port: port})
		if err != nil {
			c4.Close()
			continue
		}
		t.Cleanup(func() { c4.Close(); c6.Close() })
		return c4, c6, port
	}
	t.Fatal("no UDP port free on both 127.0.0.1 and ::1")
	return nil, nil, 0
}

// dialUnconnected opens the kind of socket a RoCE sender uses: unconnected,
// with path MTU discovery "do" (DF set, so Linux sends IPv4 identification
// 0, which the ICRC covers).
func dialUnconnected(t *testing.T, network, addr string) *net.UDPConn {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if network == "udp4" {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_DO)
			} else {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_MTU_DISCOVER, syscall.IP_PMTUDISC_DO)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := lc.ListenPacket(context.Background(), network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}
