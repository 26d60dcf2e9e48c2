package ibv

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// FuzzInput feeds arbitrary datagrams into a device's receive path
// (Device.input, what the receive goroutine calls for each datagram) and
// checks that nothing panics. The device has an RC QP connected to a peer
// (in RTS, with a posted receive and a region open to remote access), a
// UD QP and the GSI QP, so that packets reach the responder, the
// completer and the UD path. Each input is tried as it is (its ICRC is
// almost always wrong) and with its ICRC made right, from the RC peer's
// address or another one. The seeds are a valid packet of every opcode
// for those QPs.
func FuzzInput(f *testing.F) {
	a, b := rcPair(f, rcConfig{mtu: MTU256, minRNR: 1, timeout: 8, recvWR: 64})
	ud := newUDFuzz(f, b.dev)
	for i := range 64 {
		b.postRecv(f, uint64(i), 0, 1024)
	}
	qpn, psn := b.qp.QPNum(), uint32(0)
	bth := func(op roce.Opcode, qp uint32) roce.BTH {
		return roce.BTH{Opcode: op, PKey: roce.DefaultPKey, DestQP: qp, AckReq: true, PSN: psn}
	}
	reth := roce.RETH{VA: 64, RKey: b.mr.RKey, DMALen: 300}
	for _, p := range []roce.Packet{
		{BTH: bth(roce.RCSendOnly, qpn), Payload: []byte("hello")},
		{BTH: bth(roce.RCSendFirst, qpn), Payload: make([]byte, 256)},
		{BTH: bth(roce.RCSendLastWithImmediate, qpn), ImmDt: 1, Payload: []byte("end")},
		{BTH: bth(roce.RCRDMAWriteFirst, qpn), RETH: reth, Payload: make([]byte, 256)},
		{BTH: bth(roce.RCRDMAWriteOnlyWithImmediate, qpn), RETH: roce.RETH{VA: 8, RKey: b.mr.RKey, DMALen: 4}, ImmDt: 2, Payload: []byte("abcd")},
		{BTH: bth(roce.RCRDMAReadRequest, qpn), RETH: reth},
		{BTH: bth(roce.RCCompareSwap, qpn), AtomicETH: roce.AtomicETH{VA: 0, RKey: b.mr.RKey, SwapAdd: 1, Compare: 0}},
		{BTH: bth(roce.RCFetchAdd, qpn), AtomicETH: roce.AtomicETH{VA: 8, RKey: b.mr.RKey, SwapAdd: 1}},
		{BTH: bth(roce.RCAcknowledge, qpn), AETH: roce.AETH{Syndrome: roce.AETHNAKPSNSeqError}},
		{BTH: bth(roce.RCAcknowledge, qpn), AETH: roce.AETH{Syndrome: roce.RNRNAKSyndrome(3)}},
		{BTH: bth(roce.RCAtomicAcknowledge, qpn), AETH: roce.AETH{Syndrome: roce.AETHAckUnlimited}, AtomicAck: 5},
		{BTH: bth(roce.RCRDMAReadResponseOnly, qpn), AETH: roce.AETH{Syndrome: roce.AETHAckUnlimited}, Payload: []byte("data")},
		{BTH: bth(roce.UDSendOnly, ud.QPNum()), DETH: roce.DETH{QKey: 0x1234, SrcQP: 9}, Payload: []byte("datagram")},
		{BTH: bth(roce.UDSendOnlyWithImmediate, GSIQPN), DETH: roce.DETH{QKey: GSIQKey, SrcQP: 1}, ImmDt: 3, Payload: []byte("cm")},
	} {
		buf := make([]byte, p.Size())
		if _, err := p.Encode(buf, roce.Path{Src: a.dev.Addr(), Dst: b.dev.Addr()}); err != nil {
			f.Fatal(err)
		}
		f.Add(buf, false, true)
	}
	other := netip.AddrPortFrom(lo1, 9)
	c := rcConfig{mtu: MTU256, minRNR: 1, timeout: 8}
	f.Fuzz(func(t *testing.T, datagram []byte, fix, fromPeer bool) {
		// A request the responder rejects puts the QPs in ERR: start
		// them afresh, so that the next input reaches them.
		if qpState(b.qp) == QPSErr || qpState(a.qp) == QPSErr {
			for _, e := range []*end{a, b} {
				must(t, e.qp.Modify(&QPAttr{State: QPSReset}, QPState_))
			}
			connect(t, a, b, c)
			for i := range 4 {
				b.postRecv(t, uint64(i), 0, 1024)
			}
		}
		src := other
		if fromPeer {
			src = a.dev.Addr()
		}
		b.dev.input(datagram, src)
		if fix && len(datagram) >= roce.BTHSize+roce.ICRCSize {
			n := len(datagram) - roce.ICRCSize
			if crc, err := roce.ICRC(roce.Path{Src: src, Dst: b.dev.Addr()}, datagram[:n]); err == nil {
				binary.LittleEndian.PutUint32(datagram[n:], crc)
				b.dev.input(datagram, src)
			}
		}
	})
}

// newUDFuzz makes a UD QP with Q_Key 0x1234 and the GSI QP on d, in RTS,
// with receives posted.
func newUDFuzz(t testing.TB, d *Device) *QP {
	pd, err := d.AllocPD()
	must(t, err)
	cq := newCQ(t, d, 1024)
	mr, err := pd.RegMR(make([]byte, 4096), 0, AccessLocalWrite)
	must(t, err)
	var ud *QP
	for _, typ := range []QPType{QPTUD, QPTGSI} {
		qp, err := pd.CreateQP(QPInitAttr{Type: typ, SendCQ: cq.CQ, RecvCQ: cq.CQ, Cap: QPCap{MaxRecvWR: 64, MaxRecvSGE: 1}})
		must(t, err)
		qkey, mask := uint32(0x1234), QPState_|QPPKeyIndex|QPQKey|QPPort
		if typ == QPTGSI {
			qkey, mask = GSIQKey, mask&^QPPort
		}
		must(t, qp.Modify(&QPAttr{State: QPSInit, PortNum: 1, QKey: qkey}, mask))
		must(t, qp.Modify(&QPAttr{State: QPSRTR}, QPState_))
		must(t, qp.Modify(&QPAttr{State: QPSRTS}, QPState_|QPSQPSN))
		for i := range 64 {
			must(t, qp.PostRecv(&RecvWR{WRID: uint64(i), SGList: []SGE{{Addr: 0, Length: 4096, LKey: mr.LKey}}}))
		}
		if typ == QPTUD {
			ud = qp
		}
	}
	return ud
}
