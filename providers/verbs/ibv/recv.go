package ibv

import (
	"errors"
	"net/netip"

	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
	"golang.org/x/sys/unix"
)

// receive is the device's receive goroutine: it reads each datagram and
// hands it to input, which runs the responder or completer of the QP it
// is for on this goroutine.
func (d *Device) receive() {
	defer close(d.done)
	buf := make([]byte, 1<<16)
	for {
		n, src, err := d.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if d.isClosed() {
				return
			}
			continue
		}
		d.input(buf[:n], src)
	}
}

// queued reports whether datagrams wait in the device's socket for the
// receive goroutine.
func (d *Device) queued() bool {
	n := 0
	d.raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}

// input decodes a datagram's UDP payload b from src and delivers it: UD
// packets to the UD or GSI QP they name, RC requests to the responder and
// RC responses to the completer of the RC QP they name. A datagram with a
// bad ICRC counts in Stats.BadICRC; one that is malformed, for no QP, or
// for a QP of the wrong type counts in Stats.Dropped. The packet's
// payload aliases b, which input does not keep.
func (d *Device) input(b []byte, src netip.AddrPort) {
	d.stats.rxPackets.Add(1)
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	var p roce.Packet
	path := roce.Path{Src: src, Dst: d.addr}
	if err := p.Decode(b, path); err != nil {
		// A malformed datagram with a bad ICRC was damaged on the way.
		if errors.Is(err, roce.ErrICRC) || roce.CheckICRC(path, b) != nil {
			d.stats.badICRC.Add(1)
		} else {
			d.stats.dropped.Add(1)
		}
		return
	}
	qp := d.lookupQP(p.DestQP)
	// The device has one partition: the default P_Key, full (0xffff) or
	// limited (0x7fff) member.
	if qp == nil || p.PKey&0x7fff != 0x7fff {
		d.stats.dropped.Add(1)
		return
	}
	if trace.On(trace.Packet) {
		qp.tracef(trace.Packet, "qpn %d recv %s psn %d, %d bytes", p.DestQP, p.Opcode, p.PSN, len(b))
	}
	ud := p.Opcode == roce.UDSendOnly || p.Opcode == roce.UDSendOnlyWithImmediate
	switch {
	case ud && qp.init.Type != QPTRC:
		qp.inputUD(&p, src, len(b))
	case !ud && qp.init.Type == QPTRC && isResponse(p.Opcode):
		qp.inputResponse(&p, src)
	case !ud && qp.init.Type == QPTRC:
		qp.inputRequest(&p, src)
	default:
		d.stats.dropped.Add(1)
	}
}

// isResponse reports whether o is an opcode a responder sends: an ACK,
// an atomic ACK or a read response.
func isResponse(o roce.Opcode) bool {
	return o >= roce.RCRDMAReadResponseFirst && o <= roce.RCAtomicAcknowledge
}
