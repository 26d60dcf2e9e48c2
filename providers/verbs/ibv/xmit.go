package ibv

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"unsafe"

	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
	"golang.org/x/sys/unix"
)

// A transmitter sends a device's datagrams: one write to the socket per
// packet, from the goroutine that built it. With a Fault plan it first
// draws, for each datagram, whether to drop it, corrupt it, send it twice
// or hold it back until the next datagram has gone (reorder).
type transmitter struct {
	d     *Device
	fault *Fault

	mu        sync.Mutex // guards the fault state below
	rng       *rand.Rand
	held      []byte // the datagram held back for reordering
	heldTo    netip.AddrPort
	heldClass uint8
	holding   bool
}

func (t *transmitter) init(d *Device, f *Fault) {
	t.d = d
	if f != nil {
		t.fault = f
		t.rng = rand.New(rand.NewPCG(uint64(f.Seed), 0x1b1ce))
		t.held = make([]byte, 0, roce.MaxPacketSize)
	}
}

// send transmits the datagram b to to with traffic class tclass (see
// write). b may be changed (corrupted) but is not kept. Errors are
// ignored: a datagram that does not leave is one the reliability
// machinery recovers, like one lost on the way.
func (t *transmitter) send(b []byte, to netip.AddrPort, tclass uint8) {
	t.d.stats.txPackets.Add(1)
	if t.fault == nil {
		t.write(b, to, tclass)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f, c := t.fault, &t.d.stats
	// A held datagram goes after this one, whatever becomes of this one.
	release := t.holding
	t.holding = false
	switch {
	case t.rng.Float64() < f.Drop:
		c.faultDrop.Add(1)
	case t.rng.Float64() < f.Reorder && !release:
		c.faultReorder.Add(1)
		t.held = append(t.held[:0], b...)
		t.heldTo, t.heldClass = to, tclass
		t.holding = true
	default:
		if t.rng.Float64() < f.Corrupt {
			c.faultBad.Add(1)
			t.corrupt(b)
		}
		t.write(b, to, tclass)
		if t.rng.Float64() < f.Duplicate {
			c.faultDup.Add(1)
			t.write(b, to, tclass)
		}
	}
	if release {
		t.write(t.held, t.heldTo, t.heldClass)
	}
}

// write sends one datagram. A traffic class other than 0 goes with it as
// ancillary data (IP_TOS, IPV6_TCLASS: the socket is shared by every QP of
// the device, and each packet carries its own QP's or AH's class); 0
// leaves the socket's own.
func (t *transmitter) write(b []byte, to netip.AddrPort, tclass uint8) {
	if tclass == 0 {
		t.d.conn.WriteToUDPAddrPort(b, to)
		return
	}
	var oob [tclassCmsgSpace]byte
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	if t.d.addr.Addr().Is4() {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TOS
	} else {
		h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	}
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(oob[unix.CmsgLen(0):], uint32(tclass))
	t.d.conn.WriteMsgUDPAddrPort(b, oob[:unix.CmsgSpace(4)], to)
}

// tclassCmsgSpace bounds the space of one control message with an int
// (unix.CmsgSpace(4): 24 bytes on 64-bit Linux, 16 on 32-bit).
const tclassCmsgSpace = 32

// corrupt flips one bit of b in a byte the ICRC covers: any but byte 4 of
// the BTH (FECN, BECN), which the ICRC masks.
func (t *transmitter) corrupt(b []byte) {
	if len(b) < 2 {
		return
	}
	i := t.rng.IntN(len(b) - 1)
	if i >= 4 {
		i++
	}
	b[i] ^= 1 << t.rng.IntN(8)
}

// transmit encodes p into the QP's packet buffer and sends it to dest
// with traffic class tclass (AHAttr.TrafficClass). qp.mu is held (and the
// device's mrMu if the payload is region memory).
func (qp *QP) transmit(p *roce.Packet, dest netip.AddrPort, tclass uint8) {
	n, err := p.Encode(qp.txbuf, roce.Path{Src: qp.dev.addr, Dst: dest})
	if err != nil {
		// Only a bug builds a packet Encode refuses; the peer sees a
		// lost packet.
		return
	}
	if trace.On(trace.Packet) {
		qp.tracef(trace.Packet, "qpn %d send %s psn %d to qpn %d, %d bytes", qp.qpn, p.Opcode, p.PSN, p.DestQP, n)
	}
	qp.dev.tx.send(qp.txbuf[:n], dest, tclass)
}
