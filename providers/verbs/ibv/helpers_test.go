package ibv

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// freePort returns a UDP port free on every address in addrs (loopback
// addresses: Linux routes all of 127/8 on lo).
func freePort(t testing.TB, addrs ...netip.Addr) int {
	t.Helper()
	for range 50 {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addrs[0], 0)))
		if err != nil {
			t.Fatal(err)
		}
		port := c.LocalAddr().(*net.UDPAddr).Port
		conns := []*net.UDPConn{c}
		ok := true
		for _, a := range addrs[1:] {
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(port))))
			if err != nil {
				ok = false
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no UDP port free on %v", addrs)
	return 0
}

var (
	lo1 = netip.MustParseAddr("127.0.0.1")
	lo2 = netip.MustParseAddr("127.0.0.2")
	lo6 = netip.MustParseAddr("::1")
)

// openDevices opens a device on each address, all on one free port, and
// closes them when the test ends. fault, if not nil, goes to every
// device, each with its own seed.
func openDevices(t testing.TB, fault *Fault, addrs ...netip.Addr) []*Device {
	t.Helper()
	for range 10 {
		port := freePort(t, addrs...)
		var devs []*Device
		var err error
		for i, a := range addrs {
			var f *Fault
			if fault != nil {
				c := *fault
				c.Seed += int64(i)
				f = &c
			}
			var d *Device
			if d, err = OpenDevice(DeviceConfig{Addr: a, Port: port, Fault: f}); err != nil {
				break
			}
			devs = append(devs, d)
		}
		if err == nil {
			t.Cleanup(func() {
				for _, d := range devs {
					d.Close()
				}
			})
			return devs
		}
		for _, d := range devs {
			d.Close()
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	t.Fatal("could not open devices on a free port")
	return nil
}

// must fails t if err is not nil.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustErrno fails t unless err wraps errno.
func mustErrno(t testing.TB, err error, errno syscall.Errno, what string) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Fatalf("%s: error %v, want %v", what, err, errno)
	}
}

// A waitCQ is a CQ whose notify callback wakes a waiting test.
type waitCQ struct {
	*CQ
	wake chan struct{}
}

func newCQ(t testing.TB, d *Device, n int) *waitCQ {
	t.Helper()
	w := &waitCQ{wake: make(chan struct{}, 1)}
	cq, err := d.CreateCQ(n, func() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	})
	must(t, err)
	w.CQ = cq
	return w
}

// wait polls until n completions arrived or timeout passed, and returns
// them.
func (w *waitCQ) wait(t testing.TB, n int, timeout time.Duration) []WC {
	t.Helper()
	var got []WC
	buf := make([]WC, 64)
	deadline := time.After(timeout)
	for len(got) < n {
		k := w.Poll(buf[:min(len(buf), n-len(got))])
		got = append(got, buf[:k]...)
		if k > 0 {
			continue
		}
		select {
		case <-w.wake:
		case <-deadline:
			t.Fatalf("%d of %d completions after %v: %+v", len(got), n, timeout, got)
		}
	}
	return got
}

// waitOne waits for one completion and checks its status and opcode.
func (w *waitCQ) waitOne(t testing.TB, status WCStatus, op WCOpcode) WC {
	t.Helper()
	wc := w.wait(t, 1, 10*time.Second)[0]
	if wc.Status != status || (status == WCSuccess && wc.Opcode != op) {
		t.Fatalf("completion %+v, want status %d opcode %d", wc, status, op)
	}
	return wc
}

// empty checks that the CQ has no completion (after a short wait).
func (w *waitCQ) empty(t testing.TB) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	var wc [1]WC
	if w.Poll(wc[:]) != 0 {
		t.Fatalf("unexpected completion %+v", wc[0])
	}
}

// An end is one side of a test connection: a device, a PD, CQs, a QP
// and a registered buffer.
type end struct {
	dev      *Device
	pd       *PD
	scq, rcq *waitCQ
	qp       *QP
	buf      []byte
	mr       *MR
}

// rcConfig says how to build an RC connection.
type rcConfig struct {
	mtu          MTU
	sqpsn        [2]uint32 // each side's first send PSN
	timeout      uint8     // 0: 14, unless noTimeout
	noTimeout    bool      // a timeout of 0: no timer at all
	retry, rnr   uint8     // 0: 7, unless exactRetries
	exactRetries bool      // retry and rnr as given, 0 too
	minRNR       uint8
	access       Access // QP access flags (both sides)
	mrAccess     Access
	rdAtomic     uint8
	sendWR       uint32
	recvWR       uint32
	sges         uint32
	inline       uint32
	sigAll       bool
	bufSize      int
	srq          bool
	cqSize       int
	fault        *Fault
	addrs        [2]netip.Addr
	skipConnect  bool
	recvCQShared bool
	tclass       [2]uint8 // each side's AH traffic class
}

func (c *rcConfig) defaults() {
	if c.mtu == 0 {
		c.mtu = MTU1024
	}
	if c.timeout == 0 && !c.noTimeout {
		c.timeout = 14
	}
	// Tests of other things than retries have them all: a machine busy
	// with other work can hold a goroutine for a timeout or more.
	if !c.exactRetries {
		if c.retry == 0 {
			c.retry = 7
		}
		if c.rnr == 0 {
			c.rnr = 7
		}
	}
	if c.access == 0 {
		c.access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	}
	if c.mrAccess == 0 {
		c.mrAccess = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	}
	if c.rdAtomic == 0 {
		c.rdAtomic = 16
	}
	if c.sendWR == 0 {
		c.sendWR = 256
	}
	if c.recvWR == 0 {
		c.recvWR = 256
	}
	if c.sges == 0 {
		c.sges = 4
	}
	if c.bufSize == 0 {
		c.bufSize = 1 << 20
	}
	if c.cqSize == 0 {
		c.cqSize = 4096
	}
	if !c.addrs[0].IsValid() {
		c.addrs = [2]netip.Addr{lo1, lo2}
	}
}

// rcPair builds two devices with an RC QP each, connected to each other
// (unless skipConnect), with a registered buffer on each side.
func rcPair(t testing.TB, c rcConfig) (a, b *end) {
	t.Helper()
	c.defaults()
	a, b = rcEnds(t, openDevices(t, c.fault, c.addrs[0], c.addrs[1]), c)
	if !c.skipConnect {
		connect(t, a, b, c)
	}
	return a, b
}

// rcEnds makes an end with an RC QP on each of two devices.
func rcEnds(t testing.TB, devs []*Device, c rcConfig) (a, b *end) {
	t.Helper()
	c.defaults()
	ends := [2]*end{}
	for i, d := range devs {
		e := &end{dev: d}
		var err error
		e.pd, err = d.AllocPD()
		must(t, err)
		e.scq = newCQ(t, d, c.cqSize)
		e.rcq = e.scq
		if !c.recvCQShared {
			e.rcq = newCQ(t, d, c.cqSize)
		}
		var srq *SRQ
		if c.srq {
			srq, err = e.pd.CreateSRQ(int(c.recvWR), int(c.sges))
			must(t, err)
		}
		e.qp, err = e.pd.CreateQP(QPInitAttr{Type: QPTRC, SendCQ: e.scq.CQ, RecvCQ: e.rcq.CQ, SRQ: srq, SigAll: c.sigAll,
			Cap: QPCap{MaxSendWR: c.sendWR, MaxRecvWR: c.recvWR, MaxSendSGE: c.sges, MaxRecvSGE: c.sges, MaxInlineData: c.inline}})
		must(t, err)
		e.buf = make([]byte, c.bufSize)
		e.mr, err = e.pd.RegMR(e.buf, 0, c.mrAccess)
		must(t, err)
		ends[i] = e
	}
	return ends[0], ends[1]
}

// connect moves both QPs through INIT and RTR to RTS, each aimed at the
// other.
func connect(t testing.TB, a, b *end, c rcConfig) {
	t.Helper()
	c.defaults()
	ends := [2]*end{a, b}
	for _, e := range ends {
		must(t, e.qp.Modify(&QPAttr{State: QPSInit, PortNum: 1, AccessFlags: c.access}, QPState_|QPPKeyIndex|QPPort|QPAccessFlags))
	}
	for i, e := range ends {
		peer := ends[1-i]
		must(t, e.qp.Modify(&QPAttr{State: QPSRTR, AH: AHAttr{Dest: peer.dev.Addr(), TrafficClass: c.tclass[i]}, PathMTU: c.mtu, DestQPNum: peer.qp.QPNum(),
			RQPSN: c.sqpsn[1-i], MaxDestRdAtomic: c.rdAtomic, MinRNRTimer: c.minRNR},
			QPState_|QPAV|QPPathMTU|QPDestQPN|QPRQPSN|QPMaxDestRdAtomic|QPMinRNRTimer))
	}
	for i, e := range ends {
		must(t, e.qp.Modify(&QPAttr{State: QPSRTS, SQPSN: c.sqpsn[i], Timeout: c.timeout, RetryCnt: c.retry, RNRRetry: c.rnr, MaxRdAtomic: c.rdAtomic},
			QPState_|QPSQPSN|QPTimeout|QPRetryCnt|QPRNRRetry|QPMaxQPRdAtomic))
	}
}

// sge names n bytes at off of the end's buffer.
func (e *end) sge(off, n int) SGE {
	return SGE{Addr: e.mr.IOVA + uint64(off), Length: uint32(n), LKey: e.mr.LKey}
}

// sync orders the test goroutine's accesses to the end's memory with
// the device's: the device reads and writes region memory holding the
// QP's lock, and taking it here makes the race detector (which does not
// see the network between two devices) see the order the protocol gives.
// Call it before and after touching memory the device reads or writes
// for a peer without a completion on this side.
func (e *end) sync() { e.qp.Query() }

// postRecv posts a receive of n bytes at off.
func (e *end) postRecv(t testing.TB, id uint64, off, n int) {
	t.Helper()
	must(t, e.qp.PostRecv(&RecvWR{WRID: id, SGList: []SGE{e.sge(off, n)}}))
}

// fill writes a pattern derived from seed into b.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*7 + seed*13 + i>>8)
	}
}
