package ibv

import (
	"encoding/binary"
	"net/netip"
	"syscall"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// GRHSize is the size of the area at the start of every UD receive
// buffer where the device writes the packet's network header (the
// Global Route Header of InfiniBand; for RoCEv2 the IP header).
const GRHSize = 40

// sendUD sends a UD work request as one packet and completes it. qp.mu is
// held, the QP is in RTS or SQD and checkSend accepted wr. UD has no send
// queue: the datagram leaves before PostSend returns, in SQD as well.
func (qp *QP) sendUD(wr *SendWR) error {
	dest, ok := wr.AH.destination(qp.pd)
	if !ok {
		return errorf(syscall.EINVAL, "post send: AH destroyed or of another PD")
	}
	wc := WC{WRID: wr.WRID, Opcode: WCSend}
	qkey := wr.RemoteQKey
	if qkey&0x80000000 != 0 {
		// A Q_Key with its high bit set asks for the QP's own (a
		// "controlled" Q_Key, IB specification 10.2.4).
		qkey = qp.attr.QKey
	}
	p := roce.Packet{
		BTH:  roce.BTH{Opcode: roce.UDSendOnly, SE: wr.Flags&SendSolicited != 0, PKey: roce.DefaultPKey, DestQP: wr.RemoteQPN & roce.QPNMask, PSN: qp.udPSN},
		DETH: roce.DETH{QKey: qkey, SrcQP: qp.qpn},
	}
	if wr.Opcode == WRSendWithImm {
		p.Opcode = roce.UDSendOnlyWithImmediate
		p.ImmDt = wr.Imm
	}
	d := qp.dev
	d.mrMu.RLock()
	payload, ok := d.gather(qp.pd, wr.SGList, 0, int(sgeTotal(wr.SGList)), qp.scratch)
	if ok {
		p.Payload = payload
		qp.transmit(&p, dest, wr.AH.tclass)
		qp.udPSN = roce.PSNAdd(qp.udPSN, 1)
	}
	d.mrMu.RUnlock()
	if !ok {
		wc.Status = WCLocProtErr
		// A local error of a UD QP stops its send queue (SQE); its
		// receives go on. Modify to RTS resumes it.
		qp.attr.State = QPSSQE
	}
	if !ok || wr.Flags&SendSignaled != 0 || qp.init.SigAll {
		qp.completeSend(&wc)
	}
	return nil
}

// inputUD delivers a UD packet to the QP: it is dropped unless the QP is
// in RTR or later, the Q_Key matches and a receive is posted. The
// receive gets the GRH area (see putGRH) and the payload; it completes
// with IBV_WC_LOC_LEN_ERR if they do not fit.
func (qp *QP) inputUD(p *roce.Packet, src netip.AddrPort, udpLen int) {
	qp.mu.Lock()
	defer qp.unlock()
	d := qp.dev
	s := qp.attr.State
	if qp.dead || s < QPSRTR || s == QPSErr || p.DETH.QKey != qp.attr.QKey {
		d.stats.dropped.Add(1)
		return
	}
	if !qp.takeRecv() {
		d.stats.dropped.Add(1)
		return
	}
	var grh [GRHSize]byte
	putGRH(grh[:], src, d.addr, udpLen)
	d.mrMu.RLock()
	st := d.scatter(qp.pd, qp.resp.wqe.sges, 0, grh[:])
	if st == WCSuccess {
		st = d.scatter(qp.pd, qp.resp.wqe.sges, GRHSize, p.Payload)
	}
	d.mrMu.RUnlock()
	wc := WC{WRID: qp.resp.wqe.wrid, Status: st, Opcode: WCRecv}
	if st == WCSuccess {
		wc.ByteLen = uint32(GRHSize + len(p.Payload))
		wc.Flags = WCGRH
		wc.SrcQP = p.DETH.SrcQP
		wc.Src = src
		if p.Opcode == roce.UDSendOnlyWithImmediate {
			wc.Flags |= WCWithImm
			wc.Imm = p.ImmDt
		}
	}
	qp.completeRecv(&wc)
}

// putGRH writes the 40-byte GRH area of a UD receive for a datagram of
// udpLen bytes of UDP payload from src to dst, as rxe does for RoCEv2:
// for IPv6 the IPv6 header; for IPv4 20 zero bytes and then the IPv4
// header. A UDP socket does not see the header itself, so the fields it
// does not reveal are written as Linux sends them: traffic class / TOS 0,
// flow label 0, identification 0 with DF set, hop limit / TTL 64.
func putGRH(b []byte, src, dst netip.AddrPort, udpLen int) {
	clear(b[:GRHSize])
	s, t := src.Addr().Unmap(), dst.Addr().Unmap()
	if s.Is4() && t.Is4() {
		h := b[20:40]
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+8+udpLen))
		binary.BigEndian.PutUint16(h[6:], 0x4000) // DF
		h[8] = 64
		h[9] = 17 // UDP
		sa, ta := s.As4(), t.As4()
		copy(h[12:], sa[:])
		copy(h[16:], ta[:])
		binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
		return
	}
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(8+udpLen))
	b[6] = 17 // next header: UDP
	b[7] = 64
	sa, ta := src.Addr().As16(), dst.Addr().As16()
	copy(b[8:], sa[:])
	copy(b[24:], ta[:])
}

// ipv4Checksum is the header checksum of the IPv4 header h, whose
// checksum field is zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
