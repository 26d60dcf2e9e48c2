package ibv

import (
	"encoding/binary"
	"net/netip"

	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// responder is the receiving side of an RC QP: the next PSN it expects,
// the message being received, and the reads and atomics it executed
// (kept to answer their duplicates).
type responder struct {
	epsn uint32 // the PSN of the next new request
	msn  uint32 // messages completed, for the AETH
	// nakSent says a sequence NAK was sent for the gap before epsn;
	// aheadMax is the highest PSN seen after it (see restarted).
	nakSent  bool
	aheadMax uint32

	inSend, inWrite bool    // a multi-packet send or write is under way
	inRecv          bool    // wqe holds the receive of the message under way
	wqe             recvWQE // the receive being filled
	rcvd            int     // bytes of the send placed so far
	// The write under way: where its next byte goes, how many remain,
	// its whole length.
	wva          uint64
	wkey         uint32
	wresid, wlen uint32

	res     []respRes // max_dest_rd_atomic entries, used round robin
	resNext int
}

// A respRes is an executed read or atomic: what a duplicate of it gets.
type respRes struct {
	valid, atomic bool
	first, last   uint32 // the request's PSNs
	va            uint64 // read: the region address, key and length
	rkey, length  uint32
	orig          uint64 // atomic: the original value returned
}

// inputRequest is the responder's handling of an RC request packet: new
// requests in PSN order execute once; duplicates are acknowledged again
// (sends, writes) or answered from what was saved (reads, atomics); a
// packet after a gap is dropped with a sequence NAK.
func (qp *QP) inputRequest(p *roce.Packet, src netip.AddrPort) {
	qp.mu.Lock()
	defer qp.unlock()
	st := qp.attr.State
	if qp.dead || st < QPSRTR || st == QPSErr || src != qp.dest {
		qp.dev.stats.dropped.Add(1)
		return
	}
	qp.heard.Add(1)
	r := &qp.resp
	switch diff := roce.PSNDiff(p.PSN, r.epsn); {
	case diff > 0:
		if !r.nakSent || restarted(p.PSN, r.epsn, r.aheadMax) {
			qp.dev.stats.naksSent.Add(1)
			if trace.On(trace.Retransmit) {
				qp.tracef(trace.Retransmit, "qpn %d sequence NAK sent: psn %d came, %d expected", qp.qpn, p.PSN, r.epsn)
			}
			qp.sendAck(roce.AETHNAKPSNSeqError, r.epsn)
		}
		if !r.nakSent || roce.PSNCompare(p.PSN, r.aheadMax) > 0 || diff == 1 {
			r.aheadMax = p.PSN
		}
		r.nakSent = true
		return
	case diff < 0:
		qp.dev.stats.duplicates.Add(1)
		if trace.On(trace.Retransmit) {
			qp.tracef(trace.Retransmit, "qpn %d duplicate psn %d", qp.qpn, p.PSN)
		}
		qp.duplicate(p)
		return
	}
	r.nakSent = false
	if !qp.checkRequest(p) {
		return
	}
	switch p.Opcode {
	case roce.RCRDMAReadRequest:
		qp.execRead(p)
	case roce.RCCompareSwap, roce.RCFetchAdd:
		qp.execAtomic(p)
	default:
		if p.Opcode >= roce.RCRDMAWriteFirst {
			qp.execWrite(p)
		} else {
			qp.execSend(p)
		}
	}
}

// restarted reports whether psn, a packet after a gap at PSN lost whose
// loss was signalled already, shows the sender resending from lost: it
// is the PSN right after lost (lost was lost again), or well below seen,
// the highest PSN seen since the signal. A PSN just below or equal to
// seen is a packet reordered or duplicated on the way, not a new round.
// Responders use it to NAK a gap again, requesters to request lost
// responses again.
func restarted(psn, lost, seen uint32) bool {
	return roce.PSNDiff(psn, lost) == 1 && roce.PSNCompare(psn, seen) <= 0 || roce.PSNDiff(seen, psn) > 1
}

// checkRequest checks a new request's opcode against the message under
// way and the QP's remote access flags. Sends and writes must come as
// FIRST, MIDDLE..., LAST or as ONLY. A failed check NAKs the request as
// invalid and moves the QP to the error state. qp.mu is held.
func (qp *QP) checkRequest(p *roce.Packet) bool {
	r, o := &qp.resp, p.Opcode
	var ok bool
	switch {
	case r.inSend:
		ok = o == roce.RCSendMiddle || o == roce.RCSendLast || o == roce.RCSendLastWithImmediate
	case r.inWrite:
		ok = o == roce.RCRDMAWriteMiddle || o == roce.RCRDMAWriteLast || o == roce.RCRDMAWriteLastWithImmediate
	default:
		switch o {
		case roce.RCSendMiddle, roce.RCSendLast, roce.RCSendLastWithImmediate,
			roce.RCRDMAWriteMiddle, roce.RCRDMAWriteLast, roce.RCRDMAWriteLastWithImmediate:
		default:
			ok = true
		}
	}
	var need Access
	switch o {
	case roce.RCRDMAWriteFirst, roce.RCRDMAWriteOnly, roce.RCRDMAWriteOnlyWithImmediate:
		need = AccessRemoteWrite
	case roce.RCRDMAReadRequest:
		need = AccessRemoteRead
	case roce.RCCompareSwap, roce.RCFetchAdd:
		need = AccessRemoteAtomic
	}
	if !ok || qp.attr.AccessFlags&need != need {
		qp.respError(roce.AETHNAKInvalidReq, p.PSN, WCRemInvReqErr)
		return false
	}
	return true
}

// execSend places a send packet in the receive it consumes (taken at the
// message's first packet; none posted: RNR NAK) and completes the receive
// at its last. qp.mu is held.
func (qp *QP) execSend(p *roce.Packet) {
	r, o := &qp.resp, p.Opcode
	first := o == roce.RCSendFirst || o == roce.RCSendOnly || o == roce.RCSendOnlyWithImmediate
	last := o != roce.RCSendFirst && o != roce.RCSendMiddle
	if !qp.checkLength(p, first, last) {
		return
	}
	if first {
		if !qp.takeRecv() {
			qp.rnrNAK(p.PSN)
			return
		}
		r.inRecv, r.rcvd = true, 0
	}
	d := qp.dev
	d.mrMu.RLock()
	st := d.scatter(qp.pd, r.wqe.sges, r.rcvd, p.Payload)
	d.mrMu.RUnlock()
	switch st {
	case WCLocLenErr:
		qp.respError(roce.AETHNAKInvalidReq, p.PSN, WCLocLenErr)
		return
	case WCLocProtErr:
		qp.respError(roce.AETHNAKRemOpErr, p.PSN, WCLocProtErr)
		return
	}
	r.rcvd += len(p.Payload)
	r.inSend = !last
	qp.accepted(p, last)
	if last {
		r.inRecv = false
		wc := WC{WRID: r.wqe.wrid, Opcode: WCRecv, ByteLen: uint32(r.rcvd)}
		if o == roce.RCSendLastWithImmediate || o == roce.RCSendOnlyWithImmediate {
			wc.Flags, wc.Imm = WCWithImm, p.ImmDt
		}
		qp.completeRecv(&wc)
	}
	qp.ackIfAsked(p)
}

// execWrite writes a write packet's payload to the region its RETH (in
// the first packet) names. A write with immediate consumes a receive at
// its last packet and completes it with the write's length. qp.mu is
// held.
func (qp *QP) execWrite(p *roce.Packet) {
	r, o := &qp.resp, p.Opcode
	first := o == roce.RCRDMAWriteFirst || o == roce.RCRDMAWriteOnly || o == roce.RCRDMAWriteOnlyWithImmediate
	last := o != roce.RCRDMAWriteFirst && o != roce.RCRDMAWriteMiddle
	imm := o == roce.RCRDMAWriteLastWithImmediate || o == roce.RCRDMAWriteOnlyWithImmediate
	if !qp.checkLength(p, first, last) {
		return
	}
	if imm && !r.inRecv {
		if !qp.takeRecv() {
			qp.rnrNAK(p.PSN)
			return
		}
		r.inRecv = true
	}
	d := qp.dev
	if first {
		r.wva, r.wkey, r.wresid, r.wlen = p.RETH.VA, p.RETH.RKey, p.RETH.DMALen, p.RETH.DMALen
		if r.wlen > 1<<31 {
			qp.respError(roce.AETHNAKInvalidReq, p.PSN, WCRemInvReqErr)
			return
		}
		if r.wlen > 0 && !qp.remoteAllows(r.wkey, r.wva, uint64(r.wlen), AccessRemoteWrite, p.PSN) {
			return
		}
	}
	// FIRST and MIDDLE carry exactly the MTU and leave more to come;
	// LAST and ONLY carry what remains.
	n := uint32(len(p.Payload))
	if (last && n != r.wresid) || (!last && n >= r.wresid) {
		qp.respError(roce.AETHNAKInvalidReq, p.PSN, WCRemInvReqErr)
		return
	}
	if n > 0 {
		d.mrMu.RLock()
		b, ok := d.remote(qp, r.wkey, r.wva, uint64(n), AccessRemoteWrite)
		if ok {
			copy(b, p.Payload)
		}
		d.mrMu.RUnlock()
		if !ok {
			qp.respError(roce.AETHNAKRemAccErr, p.PSN, WCRemAccessErr)
			return
		}
	}
	r.wva += uint64(n)
	r.wresid -= n
	r.inWrite = !last
	qp.accepted(p, last)
	if last && !imm {
		qp.executed, qp.executedLen, qp.executedKey = AccessRemoteWrite, r.wlen, r.wkey
	}
	if imm {
		r.inRecv = false
		qp.completeRecv(&WC{WRID: r.wqe.wrid, Opcode: WCRecvRDMAWithImm, ByteLen: r.wlen, Flags: WCWithImm, Imm: p.ImmDt})
	}
	qp.ackIfAsked(p)
}

// remoteAllows reports whether the region rkey names lets the QP's peer
// reach n bytes at va with access; if not, it NAKs the request of PSN psn
// with a remote access error. qp.mu is held.
func (qp *QP) remoteAllows(rkey uint32, va, n uint64, access Access, psn uint32) bool {
	d := qp.dev
	d.mrMu.RLock()
	_, ok := d.remote(qp, rkey, va, n, access)
	d.mrMu.RUnlock()
	if !ok {
		qp.respError(roce.AETHNAKRemAccErr, psn, WCRemAccessErr)
	}
	return ok
}

// checkLength checks a send or write packet's payload against the path
// MTU: FIRST and MIDDLE packets carry exactly the MTU, LAST ones 1 byte
// to the MTU, ONLY ones up to the MTU. qp.mu is held.
func (qp *QP) checkLength(p *roce.Packet, first, last bool) bool {
	n, mtu := len(p.Payload), qp.attr.PathMTU.Bytes()
	var ok bool
	switch {
	case first && last:
		ok = n <= mtu
	case last:
		ok = n > 0 && n <= mtu
	default:
		ok = n == mtu
	}
	if !ok {
		qp.respError(roce.AETHNAKInvalidReq, p.PSN, WCRemInvReqErr)
	}
	return ok
}

// accepted moves the responder past a request packet executed in order.
// qp.mu is held.
func (qp *QP) accepted(p *roce.Packet, last bool) {
	r := &qp.resp
	r.epsn = roce.PSNAdd(p.PSN, 1)
	if last {
		r.msn = (r.msn + 1) & roce.MSNMask
	}
}

// ackIfAsked sends an ACK of p if its A bit asks for one. qp.mu is held.
func (qp *QP) ackIfAsked(p *roce.Packet) {
	if p.AckReq {
		qp.sendAck(roce.AETHAckUnlimited, p.PSN)
	}
}

// execRead answers a read request: it checks the region, saves the
// request for its duplicates, and sends the response packets, one PSN
// each. qp.mu is held.
func (qp *QP) execRead(p *roce.Packet) {
	r, reth := &qp.resp, p.RETH
	if qp.attr.MaxDestRdAtomic == 0 || reth.DMALen > 1<<31 {
		qp.respError(roce.AETHNAKInvalidReq, p.PSN, WCRemInvReqErr)
		return
	}
	if reth.DMALen > 0 && !qp.remoteAllows(reth.RKey, reth.VA, uint64(reth.DMALen), AccessRemoteRead, p.PSN) {
		return
	}
	n := npsn(WRRDMARead, reth.DMALen, qp.attr.PathMTU.Bytes())
	last := roce.PSNAdd(p.PSN, int(n)-1)
	*qp.newRes(p.PSN, last) = respRes{valid: true, first: p.PSN, last: last, va: reth.VA, rkey: reth.RKey, length: reth.DMALen}
	r.msn = (r.msn + 1) & roce.MSNMask
	r.epsn = roce.PSNAdd(last, 1)
	qp.executed, qp.executedLen, qp.executedKey = AccessRemoteRead, reth.DMALen, reth.RKey
	qp.sendReadResponses(reth.VA, reth.RKey, reth.DMALen, p.PSN)
}

// sendReadResponses sends the response packets of a read of length bytes
// at va, the first with PSN psn. If the region went away meanwhile (a
// replay), it stops and NAKs. qp.mu is held.
func (qp *QP) sendReadResponses(va uint64, rkey, length uint32, psn uint32) {
	mtu := qp.attr.PathMTU.Bytes()
	n := int(npsn(WRRDMARead, length, mtu))
	d := qp.dev
	for k := range n {
		p := roce.Packet{BTH: roce.BTH{PKey: roce.DefaultPKey, DestQP: qp.attr.DestQPNum, PSN: roce.PSNAdd(psn, k)}}
		switch {
		case n == 1:
			p.Opcode = roce.RCRDMAReadResponseOnly
		case k == 0:
			p.Opcode = roce.RCRDMAReadResponseFirst
		case k == n-1:
			p.Opcode = roce.RCRDMAReadResponseLast
		default:
			p.Opcode = roce.RCRDMAReadResponseMiddle
		}
		if p.Opcode != roce.RCRDMAReadResponseMiddle {
			p.AETH = roce.AETH{Syndrome: roce.AETHAckUnlimited, MSN: qp.resp.msn}
		}
		size := min(mtu, int(length)-k*mtu)
		d.mrMu.RLock()
		b, ok := []byte(nil), true
		if size > 0 {
			b, ok = d.remote(qp, rkey, va+uint64(k*mtu), uint64(size), AccessRemoteRead)
		}
		if ok {
			p.Payload = b
			qp.transmit(&p, qp.dest, qp.attr.AH.TrafficClass)
		}
		d.mrMu.RUnlock()
		if !ok {
			qp.respError(roce.AETHNAKRemAccErr, p.PSN, WCRemAccessErr)
			return
		}
	}
}

// execAtomic executes a compare-and-swap or fetch-and-add on 8 aligned
// bytes of a region, atomically among the device's QPs, saves the
// original value for duplicates and returns it in an atomic ACK. qp.mu is
// held.
func (qp *QP) execAtomic(p *roce.Packet) {
	r, a := &qp.resp, p.AtomicETH
	if qp.attr.MaxDestRdAtomic == 0 || a.VA&7 != 0 {
		qp.respError(roce.AETHNAKInvalidReq, p.PSN, WCRemInvReqErr)
		return
	}
	d := qp.dev
	d.mrMu.RLock()
	b, ok := d.remote(qp, a.RKey, a.VA, 8, AccessRemoteAtomic)
	var orig uint64
	if ok {
		d.atomicMu.Lock()
		orig = binary.NativeEndian.Uint64(b)
		v := orig + a.SwapAdd
		if p.Opcode == roce.RCCompareSwap {
			v = orig
			if orig == a.Compare {
				v = a.SwapAdd
			}
		}
		binary.NativeEndian.PutUint64(b, v)
		d.atomicMu.Unlock()
	}
	d.mrMu.RUnlock()
	if !ok {
		qp.respError(roce.AETHNAKRemAccErr, p.PSN, WCRemAccessErr)
		return
	}
	*qp.newRes(p.PSN, p.PSN) = respRes{valid: true, atomic: true, first: p.PSN, last: p.PSN, orig: orig}
	r.msn = (r.msn + 1) & roce.MSNMask
	r.epsn = roce.PSNAdd(p.PSN, 1)
	qp.executed, qp.executedLen, qp.executedKey = AccessRemoteAtomic, 8, a.RKey
	qp.sendAtomicAck(p.PSN, orig)
}

// newRes returns the responder resource to fill for a new read or atomic
// with PSNs first to last, the oldest one. A saved one whose PSNs overlap
// them is from 2^24 PSNs before: it is forgotten, so that duplicates of
// the new request find the new one. qp.mu is held.
func (qp *QP) newRes(first, last uint32) *respRes {
	r := &qp.resp
	if len(r.res) == 0 {
		r.res = make([]respRes, 1)
	}
	for i := range r.res {
		o := &r.res[i]
		if o.valid && roce.PSNCompare(o.first, last) <= 0 && roce.PSNCompare(first, o.last) <= 0 {
			o.valid = false
		}
	}
	res := &r.res[r.resNext%len(r.res)]
	r.resNext = (r.resNext + 1) % len(r.res)
	return res
}

// resizeRes makes room for n saved reads and atomics, keeping the newest
// of those saved (SQD -> SQD may change max_dest_rd_atomic while the
// peer can still send duplicates). qp.mu is held.
func (qp *QP) resizeRes(n int) {
	r := &qp.resp
	res, k := make([]respRes, n), 0
	for i := range r.res {
		// Oldest first: resNext is the slot to be overwritten next.
		o := r.res[(r.resNext+i)%len(r.res)]
		if o.valid {
			res[k%n] = o
			k++
		}
	}
	r.res, r.resNext = res, k%n
}

// findRes returns the saved read or atomic whose PSNs hold psn, or nil.
// qp.mu is held.
func (qp *QP) findRes(psn uint32, atomic bool) *respRes {
	for i := range qp.resp.res {
		res := &qp.resp.res[i]
		if res.valid && res.atomic == atomic && roce.PSNCompare(psn, res.first) >= 0 && roce.PSNCompare(psn, res.last) <= 0 {
			return res
		}
	}
	return nil
}

// duplicate answers a request the responder has executed: a send or
// write with an ACK of everything so far (never executing it again); a
// read by sending its responses again from the duplicate's PSN, if it
// asks for a part of the saved read; an atomic by returning the saved
// original value (never executing it again). A duplicate read or atomic
// no longer saved is dropped. qp.mu is held.
func (qp *QP) duplicate(p *roce.Packet) {
	switch p.Opcode {
	case roce.RCRDMAReadRequest:
		res, reth := qp.findRes(p.PSN, false), p.RETH
		if res == nil || reth.RKey != res.rkey || reth.VA < res.va {
			return
		}
		// The part must start where its PSN's responses start and lie
		// within the saved read (compared without sums that could wrap).
		off := reth.VA - res.va
		if off != uint64(roce.PSNDiff(p.PSN, res.first))*uint64(qp.attr.PathMTU.Bytes()) ||
			off > uint64(res.length) || uint64(reth.DMALen) > uint64(res.length)-off {
			return
		}
		qp.sendReadResponses(reth.VA, reth.RKey, reth.DMALen, p.PSN)
	case roce.RCCompareSwap, roce.RCFetchAdd:
		if res := qp.findRes(p.PSN, true); res != nil && res.first == p.PSN {
			qp.sendAtomicAck(p.PSN, res.orig)
		}
	default:
		qp.sendAck(roce.AETHAckUnlimited, roce.PSNAdd(qp.resp.epsn, -1))
	}
}

// rnrNAK tells the requester that no receive is posted for the message at
// psn: an RNR NAK with the QP's minimum RNR timer. Packets after it are
// dropped silently until the requester resends it. qp.mu is held.
func (qp *QP) rnrNAK(psn uint32) {
	r := &qp.resp
	qp.dev.stats.rnrSent.Add(1)
	if trace.On(trace.Retransmit) {
		qp.tracef(trace.Retransmit, "qpn %d RNR NAK sent for psn %d: no receive posted", qp.qpn, psn)
	}
	qp.sendAck(roce.RNRNAKSyndrome(qp.attr.MinRNRTimer), psn)
	r.nakSent, r.aheadMax = true, psn
}

// respError ends a request the responder cannot execute: a NAK with
// syndrome for psn, the receive under way (if any) completed with
// status, and the QP to the error state. qp.mu is held.
func (qp *QP) respError(syndrome roce.Syndrome, psn uint32, status WCStatus) {
	r := &qp.resp
	qp.sendAck(syndrome, psn)
	if f := qp.pd.dev.remoteAccessError; f != nil && syndrome == roce.AETHNAKRemAccErr {
		f(qp.dest.Addr(), qp.qpn)
	}
	if r.inRecv {
		r.inRecv = false
		qp.completeRecv(&WC{WRID: r.wqe.wrid, Status: status, Opcode: WCRecv})
	}
	qp.toError()
}

// sendAck sends an ACK or NAK with syndrome for psn. qp.mu is held.
func (qp *QP) sendAck(syndrome roce.Syndrome, psn uint32) {
	p := roce.Packet{
		BTH:  roce.BTH{Opcode: roce.RCAcknowledge, PKey: roce.DefaultPKey, DestQP: qp.attr.DestQPNum, PSN: psn},
		AETH: roce.AETH{Syndrome: syndrome, MSN: qp.resp.msn},
	}
	qp.transmit(&p, qp.dest, qp.attr.AH.TrafficClass)
}

// sendAtomicAck returns an atomic's original value. qp.mu is held.
func (qp *QP) sendAtomicAck(psn uint32, orig uint64) {
	p := roce.Packet{
		BTH:       roce.BTH{Opcode: roce.RCAtomicAcknowledge, PKey: roce.DefaultPKey, DestQP: qp.attr.DestQPNum, PSN: psn},
		AETH:      roce.AETH{Syndrome: roce.AETHAckUnlimited, MSN: qp.resp.msn},
		AtomicAck: orig,
	}
	qp.transmit(&p, qp.dest, qp.attr.AH.TrafficClass)
}
