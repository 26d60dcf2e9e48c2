package ibv

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestOpenDevice(t *testing.T) {
	devs := openDevices(t, nil, lo1, lo2)
	d := devs[0]
	port := d.Addr().Port()
	if d.Addr() != netip.AddrPortFrom(lo1, port) {
		t.Errorf("Addr() = %v", d.Addr())
	}
	if want := [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}; d.GID() != want {
		t.Errorf("GID() = %x, want %x", d.GID(), want)
	}
	if want := "rxe_127.0.0.1_" + strconv.Itoa(int(port)); d.Name() != want {
		t.Errorf("Name() = %q, want %q", d.Name(), want)
	}
	if a := d.Attr(); a.ActiveMTU != MTU4096 || a.MaxQPRdAtom != 128 || a.AtomicCap != 1 || a.MaxSGE < 1 {
		t.Errorf("Attr() = %+v", a)
	}
	// Another device on the same address and port: EADDRINUSE.
	_, err := OpenDevice(DeviceConfig{Addr: lo1, Port: int(port)})
	mustErrno(t, err, syscall.EADDRINUSE, "second device on the same port")
	for _, cfg := range []DeviceConfig{
		{},
		{Addr: netip.IPv4Unspecified()},
		{Addr: lo1, Port: 70000},
		{Addr: lo1, Port: int(port) + 1, Fault: &Fault{Drop: 2}},
	} {
		if d, err := OpenDevice(cfg); err == nil {
			d.Close()
			t.Errorf("OpenDevice(%+v) worked", cfg)
		}
	}
	named, err := OpenDevice(DeviceConfig{Addr: lo2, Port: int(port) + 1, Name: "mlx"})
	if err == nil {
		if named.Name() != "mlx" {
			t.Errorf("Name() = %q, want mlx", named.Name())
		}
		must(t, named.Close())
		mustErrno(t, named.Close(), syscall.EINVAL, "second Close")
	}
}

func TestPDAndMR(t *testing.T) {
	d := openDevices(t, nil, lo1)[0]
	pd, err := d.AllocPD()
	must(t, err)
	buf := make([]byte, 4096)
	for _, tt := range []struct {
		access Access
		ok     bool
	}{
		{0, true},
		{AccessLocalWrite, true},
		{AccessRemoteRead, true},
		{AccessRemoteWrite, false},
		{AccessRemoteAtomic, false},
		{AccessRemoteWrite | AccessLocalWrite, true},
		{AccessRemoteAtomic | AccessLocalWrite, true},
		{1 << 10, false},
	} {
		mr, err := pd.RegMR(buf, 0x1000, tt.access)
		if (err == nil) != tt.ok {
			t.Errorf("RegMR(access %#x) = %v, want ok %v", tt.access, err, tt.ok)
			continue
		}
		if err != nil {
			mustErrno(t, err, syscall.EINVAL, "RegMR")
			continue
		}
		if mr.LKey != mr.RKey || mr.LKey == 0 || mr.IOVA != 0x1000 {
			t.Errorf("RegMR = %+v", mr)
		}
		must(t, mr.Dereg())
		mustErrno(t, mr.Dereg(), syscall.EINVAL, "second Dereg")
	}
	// Keys are random: 20 registrations, each freed before the next,
	// have 20 different keys, and no two share their top 24 bits (what
	// an index counting regions would keep).
	keys := map[uint32]bool{}
	high := map[uint32]bool{}
	for range 20 {
		mr, err := pd.RegMR(buf, 0, 0)
		must(t, err)
		keys[mr.LKey] = true
		high[mr.LKey>>8] = true
		must(t, mr.Dereg())
	}
	if len(keys) != 20 || len(high) < 19 {
		t.Errorf("20 registrations made %d distinct keys, %d distinct top 24 bits", len(keys), len(high))
	}
	mr, err := pd.RegMR(buf, 0, 0)
	must(t, err)
	mustErrno(t, pd.Dealloc(), syscall.EBUSY, "Dealloc with an MR")
	must(t, mr.Dereg())
	must(t, pd.Dealloc())
	mustErrno(t, pd.Dealloc(), syscall.EINVAL, "second Dealloc")
	if _, err := pd.RegMR(buf, 0, 0); err == nil {
		t.Error("RegMR on a freed PD worked")
	}
}

func TestCQAndSRQLifetimes(t *testing.T) {
	d := openDevices(t, nil, lo1)[0]
	pd, err := d.AllocPD()
	must(t, err)
	_, err = d.CreateCQ(0, nil)
	mustErrno(t, err, syscall.EINVAL, "CreateCQ(0)")
	cq := newCQ(t, d, 16)
	srq, err := pd.CreateSRQ(4, 1)
	must(t, err)
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTRC, SendCQ: cq.CQ, RecvCQ: cq.CQ, SRQ: srq, Cap: QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
	must(t, err)
	mustErrno(t, cq.Destroy(), syscall.EBUSY, "Destroy of a CQ in use")
	mustErrno(t, srq.Destroy(), syscall.EBUSY, "Destroy of an SRQ in use")
	mustErrno(t, pd.Dealloc(), syscall.EBUSY, "Dealloc of a PD in use")
	mustErrno(t, qp.PostRecv(&RecvWR{}), syscall.EINVAL, "PostRecv on a QP with an SRQ")
	for i := range 4 {
		must(t, srq.PostRecv(&RecvWR{WRID: uint64(i)}))
	}
	mustErrno(t, srq.PostRecv(&RecvWR{}), syscall.ENOMEM, "PostRecv on a full SRQ")
	mustErrno(t, srq.PostRecv(&RecvWR{SGList: make([]SGE, 2)}), syscall.EINVAL, "PostRecv with too many SGEs")
	must(t, qp.Destroy())
	mustErrno(t, qp.Destroy(), syscall.EINVAL, "second QP Destroy")
	must(t, cq.Destroy())
	must(t, srq.Destroy())
	must(t, pd.Dealloc())
}

func TestQPCreateChecks(t *testing.T) {
	d := openDevices(t, nil, lo1)[0]
	pd, err := d.AllocPD()
	must(t, err)
	cq := newCQ(t, d, 16)
	other := openDevices(t, nil, lo2)[0]
	ocq := newCQ(t, other, 16)
	for _, a := range []QPInitAttr{
		{Type: 3, SendCQ: cq.CQ, RecvCQ: cq.CQ},
		{Type: QPTRC, SendCQ: cq.CQ},
		{Type: QPTRC, SendCQ: cq.CQ, RecvCQ: ocq.CQ},
		{Type: QPTRC, SendCQ: cq.CQ, RecvCQ: cq.CQ, Cap: QPCap{MaxSendSGE: 33}},
		{Type: QPTRC, SendCQ: cq.CQ, RecvCQ: cq.CQ, Cap: QPCap{MaxSendWR: 1 << 20}},
		{Type: QPTRC, SendCQ: cq.CQ, RecvCQ: cq.CQ, Cap: QPCap{MaxInlineData: 4096}},
	} {
		if qp, err := pd.CreateQP(a); err == nil {
			qp.Destroy()
			t.Errorf("CreateQP(%+v) worked", a)
		}
	}
	qp1, err := pd.CreateQP(QPInitAttr{Type: QPTGSI, SendCQ: cq.CQ, RecvCQ: cq.CQ})
	must(t, err)
	if qp1.QPNum() != GSIQPN {
		t.Errorf("GSI QPNum() = %d, want 1", qp1.QPNum())
	}
	_, err = pd.CreateQP(QPInitAttr{Type: QPTGSI, SendCQ: cq.CQ, RecvCQ: cq.CQ})
	mustErrno(t, err, syscall.EBUSY, "second GSI QP")
	seen := map[uint32]bool{}
	for range 5 {
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTUD, SendCQ: cq.CQ, RecvCQ: cq.CQ})
		must(t, err)
		if n := qp.QPNum(); n <= 1 || seen[n] {
			t.Errorf("QPNum() = %d, seen %v", n, seen)
		}
		seen[qp.QPNum()] = true
		must(t, qp.Destroy())
	}
	must(t, qp1.Destroy())
	qp1, err = pd.CreateQP(QPInitAttr{Type: QPTGSI, SendCQ: cq.CQ, RecvCQ: cq.CQ})
	must(t, err)
	must(t, qp1.Destroy())
}

// udEnd is a UD (or GSI) QP ready to send and receive.
type udEnd struct {
	dev *Device
	pd  *PD
	cq  *waitCQ
	qp  *QP
	buf []byte
	mr  *MR
}

func newUD(t *testing.T, d *Device, typ QPType, qkey uint32, srq bool) *udEnd {
	t.Helper()
	e := &udEnd{dev: d}
	var err error
	e.pd, err = d.AllocPD()
	must(t, err)
	e.cq = newCQ(t, d, 64)
	var s *SRQ
	if srq {
		s, err = e.pd.CreateSRQ(16, 2)
		must(t, err)
	}
	e.qp, err = e.pd.CreateQP(QPInitAttr{Type: typ, SendCQ: e.cq.CQ, RecvCQ: e.cq.CQ, SRQ: s,
		Cap: QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	must(t, err)
	mask := QPState_ | QPPKeyIndex | QPQKey
	if typ == QPTUD {
		mask |= QPPort
	}
	must(t, e.qp.Modify(&QPAttr{State: QPSInit, PortNum: 1, QKey: qkey}, mask))
	must(t, e.qp.Modify(&QPAttr{State: QPSRTR}, QPState_))
	must(t, e.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: 0x123}, QPState_|QPSQPSN))
	e.buf = make([]byte, 1<<14)
	e.mr, err = e.pd.RegMR(e.buf, 0, AccessLocalWrite)
	must(t, err)
	return e
}

func (e *udEnd) sge(off, n int) SGE {
	return SGE{Addr: uint64(off), Length: uint32(n), LKey: e.mr.LKey}
}

func (e *udEnd) recv(t *testing.T, id uint64, off, n int) {
	t.Helper()
	wr := &RecvWR{WRID: id, SGList: []SGE{e.sge(off, n)}}
	if s := e.qp.init.SRQ; s != nil {
		must(t, s.PostRecv(wr))
	} else {
		must(t, e.qp.PostRecv(wr))
	}
}

func TestUD(t *testing.T) {
	for _, tt := range []struct {
		name  string
		addrs []netip.Addr
		srq   bool
	}{
		{"IPv4", []netip.Addr{lo1, lo2}, false},
		{"IPv4/SRQ", []netip.Addr{lo1, lo2}, true},
		{"IPv6", []netip.Addr{lo6, lo6}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var devs []*Device
			if tt.addrs[0] == tt.addrs[1] {
				// Two devices on ::1: two ports.
				devs = append(openDevices(t, nil, lo6), openDevices(t, nil, lo6)...)
			} else {
				devs = openDevices(t, nil, tt.addrs...)
			}
			a := newUD(t, devs[0], QPTUD, 0x1234, false)
			b := newUD(t, devs[1], QPTUD, 0x1234, tt.srq)
			ah, err := a.pd.CreateAH(AHAttr{Dest: b.dev.Addr()})
			must(t, err)
			msg := a.buf[:3000]
			fill(msg, 1)
			b.recv(t, 7, 0, 40+3000)
			b.recv(t, 8, 4096, 40+100)
			b.recv(t, 9, 8192, 40+10)
			// Two SGEs, with immediate data.
			must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSendWithImm, Imm: 0xdeadbeef, Flags: SendSignaled,
				SGList: []SGE{a.sge(0, 1000), a.sge(1000, 2000)}, AH: ah, RemoteQPN: b.qp.QPNum(), RemoteQKey: 0x1234}))
			a.cq.waitOne(t, WCSuccess, WCSend)
			wc := b.cq.waitOne(t, WCSuccess, WCRecv)
			if wc.WRID != 7 || wc.ByteLen != 40+3000 || wc.Flags != WCGRH|WCWithImm || wc.Imm != 0xdeadbeef ||
				wc.SrcQP != a.qp.QPNum() || wc.Src != a.dev.Addr() || wc.QPNum != b.qp.QPNum() {
				t.Errorf("receive completion %+v", wc)
			}
			if !bytes.Equal(b.buf[40:3040], msg) {
				t.Error("received bytes differ")
			}
			checkGRH(t, b.buf[:40], a.dev.Addr(), b.dev.Addr(), 12+8+4+3000+4) // BTH, DETH, ImmDt, payload, ICRC

			// A wrong Q_Key is dropped; a Q_Key with the high bit takes
			// the QP's own. Inline data, unsignaled.
			dropped := b.dev.Stats().Dropped
			must(t, a.qp.PostSend(&SendWR{WRID: 2, Opcode: WRSend, SGList: []SGE{a.sge(0, 10)}, AH: ah, RemoteQPN: b.qp.QPNum(), RemoteQKey: 0x1235}))
			copy(a.buf, "inline!!!!")
			must(t, a.qp.PostSend(&SendWR{WRID: 3, Opcode: WRSend, Flags: SendInline, SGList: []SGE{a.sge(0, 10)},
				AH: ah, RemoteQPN: b.qp.QPNum(), RemoteQKey: 0x80000000}))
			copy(a.buf, "changed!!!")
			wc = b.cq.waitOne(t, WCSuccess, WCRecv)
			if wc.WRID != 8 || wc.ByteLen != 50 || wc.Flags != WCGRH || string(b.buf[4096+40:4096+50]) != "inline!!!!" {
				t.Errorf("receive completion %+v, bytes %q", wc, b.buf[4096+40:4096+50])
			}
			a.cq.empty(t)
			if b.dev.Stats().Dropped != dropped+1 {
				t.Errorf("Dropped = %d, want %d", b.dev.Stats().Dropped, dropped+1)
			}
			// Too long for the receive: LOC_LEN_ERR, and the QP goes on.
			must(t, a.qp.PostSend(&SendWR{WRID: 4, Opcode: WRSend, SGList: []SGE{a.sge(0, 11)}, AH: ah, RemoteQPN: b.qp.QPNum(), RemoteQKey: 0x1234}))
			if wc := b.cq.waitOne(t, WCLocLenErr, WCRecv); wc.WRID != 9 {
				t.Errorf("completion %+v", wc)
			}
			b.recv(t, 10, 0, 100)
			must(t, a.qp.PostSend(&SendWR{WRID: 5, Opcode: WRSend, SGList: []SGE{a.sge(0, 11)}, AH: ah, RemoteQPN: b.qp.QPNum(), RemoteQKey: 0x1234}))
			if wc := b.cq.waitOne(t, WCSuccess, WCRecv); wc.WRID != 10 {
				t.Errorf("completion %+v", wc)
			}
			// More than the MTU, or no AH: EINVAL.
			mustErrno(t, a.qp.PostSend(&SendWR{Opcode: WRSend, SGList: []SGE{a.sge(0, 4097)}, AH: ah}), syscall.EINVAL, "UD send over the MTU")
			mustErrno(t, a.qp.PostSend(&SendWR{Opcode: WRSend}), syscall.EINVAL, "UD send without AH")
			mustErrno(t, a.qp.PostSend(&SendWR{Opcode: WRRDMAWrite, AH: ah}), syscall.EINVAL, "UD RDMA write")
			// A bad lkey: LOC_PROT_ERR, the send queue stops (SQE) and
			// flushes until modified back to RTS.
			must(t, a.qp.PostSend(&SendWR{WRID: 6, Opcode: WRSend, SGList: []SGE{{Addr: 0, Length: 4, LKey: 0xffff00}}, AH: ah, RemoteQPN: b.qp.QPNum(), RemoteQKey: 0x1234}))
			a.cq.waitOne(t, WCLocProtErr, 0)
			if at, _ := a.qp.Query(); at.State != QPSSQE {
				t.Errorf("state %d after a local error, want SQE", at.State)
			}
			must(t, a.qp.PostSend(&SendWR{WRID: 7, Opcode: WRSend, AH: ah, RemoteQPN: b.qp.QPNum()}))
			a.cq.waitOne(t, WCWRFlushErr, 0)
			must(t, a.qp.Modify(&QPAttr{State: QPSRTS}, QPState_))
			must(t, a.qp.PostSend(&SendWR{WRID: 8, Opcode: WRSend, Flags: SendSignaled, AH: ah, RemoteQPN: b.qp.QPNum()}))
			a.cq.waitOne(t, WCSuccess, WCSend)
		})
	}
}

// checkGRH checks the GRH area of a UD receive of a datagram with n bytes
// of UDP payload: for IPv4 20 zero bytes and the IPv4 header; for IPv6
// the IPv6 header.
func checkGRH(t *testing.T, g []byte, src, dst netip.AddrPort, n int) {
	t.Helper()
	if src.Addr().Is4() {
		h := g[20:]
		s, d := src.Addr().As4(), dst.Addr().As4()
		if !bytes.Equal(g[:20], make([]byte, 20)) || h[0] != 0x45 || binary.BigEndian.Uint16(h[2:]) != uint16(20+8+n) ||
			h[9] != 17 || !bytes.Equal(h[12:16], s[:]) || !bytes.Equal(h[16:20], d[:]) || ipv4Checksum(h) != 0 {
			t.Errorf("GRH area %x", g)
		}
		return
	}
	s, d := src.Addr().As16(), dst.Addr().As16()
	if g[0]>>4 != 6 || binary.BigEndian.Uint16(g[4:]) != uint16(8+n) || g[6] != 17 ||
		!bytes.Equal(g[8:24], s[:]) || !bytes.Equal(g[24:40], d[:]) {
		t.Errorf("GRH area %x", g)
	}
}

func TestGSI(t *testing.T) {
	devs := openDevices(t, nil, lo1, lo2)
	a := newUD(t, devs[0], QPTGSI, GSIQKey, false)
	b := newUD(t, devs[1], QPTGSI, GSIQKey, false)
	// QP1's Q_Key is fixed.
	if err := a.qp.Modify(&QPAttr{QKey: 5}, QPQKey); err == nil {
		t.Error("GSI QP took Q_Key 5")
	}
	ah, err := a.pd.CreateAH(AHAttr{Dest: b.dev.Addr()})
	must(t, err)
	copy(a.buf, "REQ")
	b.recv(t, 1, 0, 256)
	must(t, a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGList: []SGE{a.sge(0, 3)}, AH: ah, RemoteQPN: GSIQPN, RemoteQKey: GSIQKey}))
	a.cq.waitOne(t, WCSuccess, WCSend)
	wc := b.cq.waitOne(t, WCSuccess, WCRecv)
	if wc.SrcQP != GSIQPN || wc.QPNum != GSIQPN || string(b.buf[40:43]) != "REQ" {
		t.Errorf("completion %+v, bytes %q", wc, b.buf[40:43])
	}
}

func TestAH(t *testing.T) {
	devs := openDevices(t, nil, lo1, lo2)
	pd, err := devs[0].AllocPD()
	must(t, err)
	for _, a := range []AHAttr{{}, {Dest: netip.AddrPortFrom(lo6, 1)}, {Dest: netip.AddrPortFrom(lo2, 0)}} {
		if _, err := pd.CreateAH(a); err == nil {
			t.Errorf("CreateAH(%v) worked", a.Dest)
		}
	}
	ah, err := pd.CreateAH(AHAttr{Dest: netip.AddrPortFrom(netip.AddrFrom16(lo2.As16()), 5)})
	must(t, err)
	if ah.dest != netip.AddrPortFrom(lo2, 5) {
		t.Errorf("AH for an IPv4-mapped address: %v", ah.dest)
	}
	mustErrno(t, pd.Dealloc(), syscall.EBUSY, "Dealloc with an AH")
	must(t, ah.Destroy())
	must(t, pd.Dealloc())
}

func TestCQOverrun(t *testing.T) {
	devs := openDevices(t, nil, lo1, lo2)
	a := newUD(t, devs[0], QPTUD, 1, false)
	pd, err := devs[1].AllocPD()
	must(t, err)
	cq := newCQ(t, devs[1], 2)
	qp, err := pd.CreateQP(QPInitAttr{Type: QPTUD, SendCQ: cq.CQ, RecvCQ: cq.CQ, Cap: QPCap{MaxRecvWR: 8, MaxRecvSGE: 1}})
	must(t, err)
	must(t, qp.Modify(&QPAttr{State: QPSInit, PortNum: 1, QKey: 1}, QPState_|QPPKeyIndex|QPPort|QPQKey))
	must(t, qp.Modify(&QPAttr{State: QPSRTR}, QPState_))
	buf := make([]byte, 4096)
	mr, err := pd.RegMR(buf, 0, AccessLocalWrite)
	must(t, err)
	for i := range 4 {
		must(t, qp.PostRecv(&RecvWR{WRID: uint64(i), SGList: []SGE{{Addr: 0, Length: 100, LKey: mr.LKey}}}))
	}
	ah, err := a.pd.CreateAH(AHAttr{Dest: devs[1].Addr()})
	must(t, err)
	for range 3 {
		must(t, a.qp.PostSend(&SendWR{Opcode: WRSend, AH: ah, RemoteQPN: qp.QPNum(), RemoteQKey: 1}))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if at, _ := qp.Query(); at.State == QPSErr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("QP not in ERR after its CQ overran")
		}
		time.Sleep(time.Millisecond)
	}
	if got := cq.wait(t, 2, time.Second); got[0].WRID != 0 || got[1].WRID != 1 {
		t.Errorf("completions %+v", got)
	}
	cq.empty(t)
}

// TestNilPD: creating objects on a nil PD fails with EINVAL instead of
// panicking.
func TestNilPD(t *testing.T) {
	d := openDevices(t, nil, lo1)[0]
	cq := newCQ(t, d, 4)
	var pd *PD
	_, err := pd.CreateQP(QPInitAttr{Type: QPTRC, SendCQ: cq.CQ, RecvCQ: cq.CQ})
	mustErrno(t, err, syscall.EINVAL, "create qp on a nil PD")
	_, err = pd.CreateAH(AHAttr{Dest: d.Addr()})
	mustErrno(t, err, syscall.EINVAL, "create ah on a nil PD")
	_, err = pd.CreateSRQ(1, 1)
	mustErrno(t, err, syscall.EINVAL, "create srq on a nil PD")
	_, err = pd.RegMR(make([]byte, 8), 0, 0)
	mustErrno(t, err, syscall.EINVAL, "reg mr on a nil PD")
}

// TestDestroyedQPHoldsNoQueues: a destroyed QP and CQ leave the device's
// counts (NumQPs, NumCQs) and let go of their queues and buffers, so that
// a reference that outlives them (a stopped timer, a lingering
// connection) keeps no queue memory alive: 100 destroyed QPs of 4096
// send and receive work requests, still referenced, hold less than 4 KiB
// each. Their queues would be hundreds of KiB; the objects themselves are
// about 1 KiB, and the heap also counts what the process's other
// goroutines hold at the time (a -race CI run measured 1050 bytes).
func TestDestroyedQPHoldsNoQueues(t *testing.T) {
	const n = 100
	d := openDevices(t, nil, lo1)[0]
	pd, err := d.AllocPD()
	must(t, err)
	baseQPs, baseCQs := d.NumQPs(), d.NumCQs()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var kept []*QP
	var keptCQs []*CQ
	for range n {
		cq, err := d.CreateCQ(8192, nil)
		must(t, err)
		qp, err := pd.CreateQP(QPInitAttr{Type: QPTRC, SendCQ: cq, RecvCQ: cq,
			Cap: QPCap{MaxSendWR: 4096, MaxRecvWR: 4096, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 400}})
		must(t, err)
		kept, keptCQs = append(kept, qp), append(keptCQs, cq)
	}
	if q, c := d.NumQPs(), d.NumCQs(); q != baseQPs+n || c != baseCQs+n {
		t.Fatalf("with %d QPs made: NumQPs %d, NumCQs %d; baseline %d and %d", n, q, c, baseQPs, baseCQs)
	}
	for i := range kept {
		must(t, kept[i].Destroy())
		must(t, keptCQs[i].Destroy())
	}
	if q, c := d.NumQPs(), d.NumCQs(); q != baseQPs || c != baseCQs {
		t.Errorf("after Destroy: NumQPs %d, NumCQs %d; want the baseline %d and %d", q, c, baseQPs, baseCQs)
	}
	after := heap()
	per := int64(after-before) / n
	t.Logf("live heap %d -> %d bytes with %d destroyed QPs and CQs referenced: %d bytes each", before, after, n, per)
	if per > 4<<10 {
		t.Errorf("a destroyed QP and CQ still referenced hold %d bytes, want at most 4096", per)
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(keptCQs)
	must(t, pd.Dealloc())
}
