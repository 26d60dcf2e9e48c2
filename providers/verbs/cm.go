package verbs

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
	"github.com/fabricfs/fabricfs/providers/verbs/cm"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// The connection manager (docs/verbs.md, "Connection management"). Each
// device runs one agent: its GSI QP (QP1) sends and receives the MADs of
// package cm in UD datagrams to the peer devices' QP1, Q_Key 0x80010000.
// One goroutine per agent takes the received MADs, the send completions
// and the retransmission timers, so everything the agent reports to
// endpoints (connected, rejected, shut down, failed) happens on it, in
// order, without a lock held; endpoints call the agent from any goroutine
// and never wait for that goroutine.
//
// Service ports, as rdma_cm's port spaces: RC listeners and connecting
// endpoints take ports of one space (REQ's service ID 0x0106_PPPP), UD
// endpoints of another (SIDR's 0x0111_PPPP). An endpoint's address is its
// device's IP and its port.

// Timing and sizes of the connection manager. Tests shorten the times.
var (
	cmTimeout    = 250 * time.Millisecond // until a request is sent again; doubles each time
	cmMaxTimeout = 2 * time.Second
	cmRetries    = 8                // sends after the first before giving up, 14 s after it
	cmLinger     = 10 * time.Second // a finished connection answers duplicates this long
)

const (
	cmRecvs    = 64   // receive buffers of QP1
	cmSends    = 64   // send buffers of QP1
	cmBacklog  = 4096 // MADs waiting for a send buffer; more are dropped (and sent again by their timers)
	cmSlotSize = GRHSize + cm.MADSize
	maxAHs     = 4096 // address handles the agent keeps, one per peer device
	// Ephemeral service ports, as Linux's ip_local_port_range.
	ephemeralLo, ephemeralHi = 32768, 60999
)

// agent is a device's connection manager.
type agent struct {
	d    *device
	pd   *ibv.PD
	cq   *ibv.CQ
	qp   *ibv.QP
	buf  []byte // cmRecvs receive slots, then cmSends send slots
	mr   *ibv.MR
	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	free      []int    // send slots not in use
	backlog   []outMAD // waiting for a send slot
	ahs       map[netip.Addr]*ibv.AH
	rcPorts   map[uint16]*passiveEndpoint // RC service ports taken; nil for a connecting endpoint's
	udPorts   map[uint16]*udEndpoint
	conns     map[uint32]*cmConn   // by our communication ID
	byRemote  map[remoteID]*cmConn // connections requested of us, by the requester's
	sidrs     map[uint32]*sidrReq  // service resolutions under way, by request ID
	work      []func()             // for the agent's goroutine
	malformed uint64               // MADs dropped as malformed
	lose      func(cm.Msg) bool    // tests: which MADs to lose on the way out; nil: none
}

// outMAD is a message and the device it goes to.
type outMAD struct {
	dst netip.Addr
	msg cm.Msg
}

// remoteID names a connection by its requester: device and its
// communication ID.
type remoteID struct {
	ip netip.Addr
	id uint32
}

// newAgent starts the connection manager of d.
func newAgent(d *device) (*agent, error) {
	a := &agent{
		d: d, kick: make(chan struct{}, 1), done: make(chan struct{}),
		buf: make([]byte, (cmRecvs+cmSends)*cmSlotSize), ahs: map[netip.Addr]*ibv.AH{},
		rcPorts: map[uint16]*passiveEndpoint{}, udPorts: map[uint16]*udEndpoint{},
		conns: map[uint32]*cmConn{}, byRemote: map[remoteID]*cmConn{}, sidrs: map[uint32]*sidrReq{},
	}
	if err := a.setup(); err != nil {
		a.teardown()
		return nil, err
	}
	for i := cmRecvs; i < cmRecvs+cmSends; i++ {
		a.free = append(a.free, i)
	}
	for i := 0; i < cmRecvs; i++ {
		if err := a.postRecv(i); err != nil {
			a.teardown()
			return nil, err
		}
	}
	a.wg.Add(1)
	go a.run()
	return a, nil
}

// setup makes QP1 and takes it to RTS.
func (a *agent) setup() error {
	var err error
	if a.pd, err = a.d.dev.AllocPD(); err != nil {
		return ibvError("connection manager: protection domain", err)
	}
	if a.mr, err = a.pd.RegMR(a.buf, 0, ibv.AccessLocalWrite); err != nil {
		return ibvError("connection manager: registering buffers", err)
	}
	if a.cq, err = a.d.dev.CreateCQ(cmRecvs+cmSends, a.wake); err != nil {
		return ibvError("connection manager: CQ", err)
	}
	a.qp, err = a.pd.CreateQP(ibv.QPInitAttr{Type: ibv.QPTGSI, SendCQ: a.cq, RecvCQ: a.cq,
		Cap:      ibv.QPCap{MaxSendWR: cmSends, MaxRecvWR: cmRecvs, MaxSendSGE: 1, MaxRecvSGE: 1},
		TraceUID: trace.NoUID, TracePath: "verbs/" + a.d.name + "/qp1"}) // the device's own: root's readers see its CM packets
	if err != nil {
		return ibvError("connection manager: QP1", err)
	}
	return udToRTS(a.qp, ibv.GSIQKey)
}

// udToRTS takes a UD (or GSI) QP from RESET to RTS, receiving datagrams
// with qkey.
func udToRTS(qp *ibv.QP, qkey uint32) error {
	steps := []struct {
		attr ibv.QPAttr
		mask ibv.QPAttrMask
	}{
		{ibv.QPAttr{State: ibv.QPSInit, PKeyIndex: 0, PortNum: 1, QKey: qkey}, ibv.QPState_ | ibv.QPPKeyIndex | ibv.QPPort | ibv.QPQKey},
		{ibv.QPAttr{State: ibv.QPSRTR}, ibv.QPState_},
		{ibv.QPAttr{State: ibv.QPSRTS, SQPSN: 0}, ibv.QPState_ | ibv.QPSQPSN},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			return ibvError("taking a UD QP to RTS", err)
		}
	}
	return nil
}

// teardown destroys what setup made, in reverse order.
func (a *agent) teardown() {
	if a.qp != nil {
		a.qp.Destroy()
	}
	for _, ah := range a.ahs {
		ah.Destroy()
	}
	if a.cq != nil {
		a.cq.Destroy()
	}
	if a.mr != nil {
		a.mr.Dereg()
	}
	if a.pd != nil {
		a.pd.Dealloc()
	}
}

// close stops the agent: its goroutine, its timers, its QP.
func (a *agent) close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	for _, c := range a.conns {
		c.stop()
	}
	for _, s := range a.sidrs {
		s.stop()
	}
	a.mu.Unlock()
	close(a.done)
	a.wg.Wait()
	a.mu.Lock()
	a.teardown()
	a.mu.Unlock()
}

// wake is QP1's CQ notification.
func (a *agent) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// do runs f on the agent's goroutine.
func (a *agent) do(f func()) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.work = append(a.work, f)
	a.mu.Unlock()
	a.wake()
}

func (a *agent) run() {
	defer a.wg.Done()
	wcs := make([]ibv.WC, 16)
	for {
		select {
		case <-a.kick:
		case <-a.done:
			return
		}
		for {
			n := a.cq.Poll(wcs)
			for i := range wcs[:n] {
				a.completed(&wcs[i])
			}
			if n < len(wcs) {
				break
			}
		}
		a.mu.Lock()
		work := a.work
		a.work = nil
		a.mu.Unlock()
		for _, f := range work {
			f()
		}
	}
}

// completed handles a completion of QP1: a received MAD, or a send
// buffer free again.
func (a *agent) completed(wc *ibv.WC) {
	slot := int(wc.WRID)
	if slot >= cmRecvs {
		a.mu.Lock()
		a.free = append(a.free, slot)
		a.flushLocked()
		a.mu.Unlock()
		return
	}
	if wc.Status == ibv.WCWRFlushErr {
		return // the agent is closing
	}
	var m cm.Msg
	err := errShortMAD // or longer than a MAD: IBV_WC_LOC_LEN_ERR
	if n := int(wc.ByteLen); wc.Status == ibv.WCSuccess && n >= GRHSize && n <= cmSlotSize {
		b := a.slot(slot)[GRHSize:n]
		m, err = cm.Decode(b)
	}
	src := wc.Src.Addr().Unmap().WithZone("")
	if a.postRecv(slot) != nil {
		return // the QP is going down
	}
	if err != nil {
		a.mu.Lock()
		a.malformed++
		a.mu.Unlock()
		return
	}
	a.handle(src, &m)
}

var errShortMAD = core.Errorf(fi.EIO, "verbs: a datagram on QP1 that does not fit a GRH and a MAD")

func (a *agent) slot(i int) []byte { return a.buf[i*cmSlotSize : (i+1)*cmSlotSize] }

func (a *agent) postRecv(slot int) error {
	wr := ibv.RecvWR{WRID: uint64(slot), SGList: []ibv.SGE{{
		Addr: a.mr.IOVA + uint64(slot*cmSlotSize), Length: cmSlotSize, LKey: a.mr.LKey}}}
	if err := a.qp.PostRecv(&wr); err != nil {
		return ibvError("connection manager: posting a receive", err)
	}
	return nil
}

// sendLocked sends m to the connection manager of the device with IP
// dst, as soon as a send buffer is free.
func (a *agent) sendLocked(dst netip.Addr, m cm.Msg) {
	if a.closed || (a.lose != nil && a.lose(m)) {
		return
	}
	if len(a.backlog) < cmBacklog {
		a.backlog = append(a.backlog, outMAD{dst, m})
	}
	a.flushLocked()
}

// flushLocked sends what waits while send buffers are free.
func (a *agent) flushLocked() {
	for len(a.backlog) > 0 && len(a.free) > 0 && !a.closed {
		out := a.backlog[0]
		a.backlog = a.backlog[1:]
		slot := a.free[len(a.free)-1]
		if err := out.msg.Encode(a.slot(slot)); err != nil {
			continue // our own message: cannot happen
		}
		ah, err := a.ahLocked(out.dst)
		if err != nil {
			continue
		}
		wr := ibv.SendWR{WRID: uint64(slot), Opcode: ibv.WRSend, Flags: ibv.SendSignaled, AH: ah, RemoteQPN: ibv.GSIQPN, RemoteQKey: ibv.GSIQKey,
			SGList: []ibv.SGE{{Addr: a.mr.IOVA + uint64(slot*cmSlotSize), Length: cm.MADSize, LKey: a.mr.LKey}}}
		if err := a.qp.PostSend(&wr); err != nil {
			continue // lost; its timer sends it again
		}
		a.free = a.free[:len(a.free)-1]
	}
	if len(a.backlog) == 0 {
		a.backlog = nil
	}
}

// ahLocked is the address handle of the device with IP ip.
func (a *agent) ahLocked(ip netip.Addr) (*ibv.AH, error) {
	if ah := a.ahs[ip]; ah != nil {
		return ah, nil
	}
	if len(a.ahs) >= maxAHs {
		for k, ah := range a.ahs {
			ah.Destroy()
			delete(a.ahs, k)
		}
	}
	ah, err := a.pd.CreateAH(ibv.AHAttr{Dest: a.d.peer(ip)})
	if err != nil {
		return nil, ibvError("address handle for "+ip.String(), err)
	}
	a.ahs[ip] = ah
	return ah, nil
}

// Service ports.

// bindRC takes RC service port p (0: a free ephemeral one) for l, a
// listener, or nil for a connecting endpoint.
func (a *agent) bindRC(p uint16, l *passiveEndpoint) (uint16, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return bindPort(a.rcPorts, p, l)
}

func (a *agent) unbindRC(p uint16) {
	a.mu.Lock()
	delete(a.rcPorts, p)
	a.mu.Unlock()
}

func (a *agent) bindUD(p uint16, e *udEndpoint) (uint16, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return bindPort(a.udPorts, p, e)
}

func (a *agent) unbindUD(p uint16) {
	a.mu.Lock()
	delete(a.udPorts, p)
	a.mu.Unlock()
}

// bindPort takes port p of a space for v, or a free ephemeral one for 0.
func bindPort[V any](space map[uint16]V, p uint16, v V) (uint16, error) {
	if p != 0 {
		if _, used := space[p]; used {
			return 0, core.Errorf(fi.EADDRINUSE, "verbs: service port %d is in use", p)
		}
		space[p] = v
		return p, nil
	}
	n := ephemeralHi - ephemeralLo + 1
	start := rand.IntN(n)
	for i := range n {
		p := uint16(ephemeralLo + (start+i)%n)
		if _, used := space[p]; !used {
			space[p] = v
			return p, nil
		}
	}
	return 0, core.Errorf(fi.EADDRINUSE, "verbs: no free service port")
}

// newCommIDLocked picks an unused communication ID, never 0.
func (a *agent) newCommIDLocked() uint32 {
	for {
		id := rand.Uint32()
		if _, used := a.conns[id]; id != 0 && !used {
			return id
		}
	}
}

// retx is a request sent until its answer comes: REQ, REP, DREQ,
// SIDR_REQ.
type retx struct {
	dst   netip.Addr
	msg   cm.Msg
	tries int
	timer *time.Timer
	gen   int // counts arm and stop: a timer of an earlier generation does nothing
}

// armLocked sends msg to dst and sends it again after each timeout until
// stop, calling giveUp on the agent's goroutine after cmRetries.
func (a *agent) armLocked(r *retx, dst netip.Addr, msg cm.Msg, giveUp func()) {
	r.stop()
	r.dst, r.msg, r.tries = dst, msg, 0
	gen := r.gen
	a.sendLocked(dst, msg)
	var fire func()
	timeout := cmTimeout
	fire = func() {
		a.do(func() {
			a.mu.Lock()
			if r.gen != gen {
				a.mu.Unlock()
				return // answered meanwhile
			}
			if r.tries++; r.tries > cmRetries {
				r.stop()
				a.mu.Unlock()
				giveUp()
				return
			}
			a.sendLocked(r.dst, r.msg)
			timeout = min(2*timeout, cmMaxTimeout)
			r.timer = time.AfterFunc(timeout, fire)
			a.mu.Unlock()
		})
	}
	r.timer = time.AfterFunc(timeout, fire)
}

// stop ends the retransmissions.
func (r *retx) stop() {
	r.gen++
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}
