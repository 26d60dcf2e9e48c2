package ibv

import (
	"math/rand/v2"
	"net/netip"
	"sync"

	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// A transmitter sends a device's datagrams: one write to the socket per
// packet, from the goroutine that built it. With a Fault plan it first
// draws, for each datagram, whether to drop it, corrupt it, send it twice
// or hold it back until the next datagram has gone (reorder).
type transmitter struct {
	d     *Device
	fault *Fault

	mu      sync.Mutex // guards the fault state below
	rng     *rand.Rand
	held    []byte // the datagram held back for reordering
	heldTo  netip.AddrPort
	holding bool
}

func (t *transmitter) init(d *Device, f *Fault) {
	t.d = d
	if f != nil {
		t.fault = f
		t.rng = rand.New(rand.NewPCG(uint64(f.Seed), 0x1b1ce))
		t.held = make([]byte, 0, roce.MaxPacketSize)
	}
}

// send transmits the datagram b to to. b may be changed (corrupted) but is
// not kept. Errors are ignored: a datagram that does not leave is one the
// reliability machinery recovers, like one lost on the way.
func (t *transmitter) send(b []byte, to netip.AddrPort) {
	t.d.stats.txPackets.Add(1)
	if t.fault == nil {
		t.d.conn.WriteToUDPAddrPort(b, to)
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
		t.heldTo = to
		t.holding = true
	default:
		if t.rng.Float64() < f.Corrupt {
			c.faultBad.Add(1)
			t.corrupt(b)
		}
		t.d.conn.WriteToUDPAddrPort(b, to)
		if t.rng.Float64() < f.Duplicate {
			c.faultDup.Add(1)
			t.d.conn.WriteToUDPAddrPort(b, to)
		}
	}
	if release {
		t.d.conn.WriteToUDPAddrPort(t.held, t.heldTo)
	}
}

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

// transmit encodes p into the QP's packet buffer and sends it to dest.
// qp.mu is held (and the device's mrMu if the payload is region memory).
func (qp *QP) transmit(p *roce.Packet, dest netip.AddrPort) {
	n, err := p.Encode(qp.txbuf, roce.Path{Src: qp.dev.addr, Dst: dest})
	if err != nil {
		// Only a bug builds a packet Encode refuses; the peer sees a
		// lost packet.
		return
	}
	if trace.On(trace.Packet) {
		qp.tracef(trace.Packet, "qpn %d send %s psn %d to qpn %d, %d bytes", qp.qpn, p.Opcode, p.PSN, p.DestQP, n)
	}
	qp.dev.tx.send(qp.txbuf[:n], dest)
}
