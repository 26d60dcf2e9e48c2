// Command verbsperf measures fabricfs's software RDMA device (package
// providers/verbs/ibv) against the loopback UDP it runs on, in one run:
//
//   - udp-lat: raw UDP ping-pong between two sockets, one datagram each
//     way (sizes up to the MTU), half a round trip: the floor under any
//     RoCE ping-pong on this machine;
//   - udp-bw: raw UDP throughput from one socket to another of datagrams
//     as large as the RoCE packets of a message of the size (its payload,
//     at most the MTU, plus RoCE's headers; payload bytes per second
//     counted at the receiver): the ceiling over RDMA write bandwidth;
//   - rc-lat: RC SEND ping-pong between two devices (127.0.0.1 and
//     127.0.0.2 by default), each side busy-polling its CQ, as
//     ibv_rc_pingpong and fi_pingpong do;
//   - rc-write: RDMA WRITE bandwidth with -window writes in flight, every
//     write signaled.
//
// Both devices live in this process, each QP driven by its own goroutine.
// For each size it prints a fabtests-style table per test and the ratios
// rc-lat/udp-lat and rc-write/udp-bw, and with -json writes every number
// as JSON. scripts/bench.sh -e verbs runs it; see docs/bench.md.
//
//	verbsperf [-sizes 64,4096,65536,1048576] [-iters N] [-bytes N]
//	          [-window N] [-mtu 4096] [-addrs 127.0.0.1,127.0.0.2] [-json FILE]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

func main() {
	sizes := flag.String("sizes", "64,4096,65536,1048576", "message sizes in bytes, comma-separated")
	iters := flag.Int("iters", 10000, "timed round trips per latency test (sizes of 64 KiB and more use a tenth)")
	total := flag.Int64("bytes", 256<<20, "bytes moved per bandwidth test (at most 200000 writes)")
	window := flag.Int("window", 64, "RDMA writes in flight in rc-write")
	mtu := flag.Int("mtu", 4096, "path MTU in bytes: 256, 512, 1024, 2048 or 4096")
	addrs := flag.String("addrs", "127.0.0.1,127.0.0.2", "the two devices' IP addresses")
	repeats := flag.Int("r", 3, "repeats of each test; medians are reported")
	jsonOut := flag.String("json", "", "write the results as JSON to this file")
	flag.Parse()
	cfg, err := parseConfig(*sizes, *addrs, *mtu)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verbsperf:", err)
		flag.Usage()
		os.Exit(2)
	}
	cfg.iters, cfg.total, cfg.window, cfg.repeats = *iters, *total, *window, *repeats
	if cfg.iters < 1 || cfg.total < 1 || cfg.window < 1 || cfg.repeats < 1 {
		fmt.Fprintln(os.Stderr, "verbsperf: -iters, -bytes, -window and -r must be positive")
		os.Exit(2)
	}
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "verbsperf:", err)
		os.Exit(1)
	}
	printTables(res)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "verbsperf:", err)
			os.Exit(1)
		}
	}
}

type config struct {
	sizes   []int
	addrs   [2]netip.Addr
	mtu     ibv.MTU
	iters   int
	total   int64
	window  int
	repeats int
}

func parseConfig(sizes, addrs string, mtu int) (config, error) {
	var c config
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1<<30 {
			return c, fmt.Errorf("bad size %q (1 B .. 1 GiB)", s)
		}
		c.sizes = append(c.sizes, n)
	}
	as := strings.Split(addrs, ",")
	if len(as) != 2 {
		return c, fmt.Errorf("-addrs takes two addresses")
	}
	for i, s := range as {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return c, err
		}
		c.addrs[i] = a
	}
	for m := ibv.MTU256; m <= ibv.MTU4096; m++ {
		if m.Bytes() == mtu {
			c.mtu = m
		}
	}
	if c.mtu == 0 {
		return c, fmt.Errorf("bad MTU %d", mtu)
	}
	return c, nil
}

// Result is one size's medians.
type Result struct {
	Size         int     `json:"size"`
	UDPLatUsec   float64 `json:"udp_lat_usec,omitempty"` // 0 above the MTU
	RCLatUsec    float64 `json:"rc_lat_usec"`
	UDPBwMBps    float64 `json:"udp_bw_mbps"`
	RCWriteMBps  float64 `json:"rc_write_mbps"`
	LatRatio     float64 `json:"lat_ratio,omitempty"` // rc-lat / udp-lat
	BwRatio      float64 `json:"bw_ratio"`            // rc-write / udp-bw
	Retransmits  uint64  `json:"retransmits"`         // the devices' Stats over this size's runs
	LatIters     int     `json:"lat_iters"`
	BwBytes      int64   `json:"bw_bytes"`
	RepeatsTaken int     `json:"repeats"`
}

func run(c config) ([]Result, error) {
	var out []Result
	for _, size := range c.sizes {
		r := Result{Size: size, LatIters: c.iters, BwBytes: c.total, RepeatsTaken: c.repeats}
		if size >= 65536 {
			r.LatIters = max(c.iters/10, 1)
		}
		var udpLat, rcLat, udpBw, rcBw []float64
		for i := 0; i < c.repeats; i++ {
			if size <= c.mtu.Bytes() {
				v, err := udpPingPong(c, size, r.LatIters)
				if err != nil {
					return nil, fmt.Errorf("udp-lat %d B: %w", size, err)
				}
				udpLat = append(udpLat, v)
			}
			v, err := udpThroughput(c, size, c.total)
			if err != nil {
				return nil, fmt.Errorf("udp-bw: %w", err)
			}
			udpBw = append(udpBw, v)
			p, err := newPair(c)
			if err != nil {
				return nil, err
			}
			lat, err := p.pingPong(size, r.LatIters)
			if err == nil {
				rcLat = append(rcLat, lat)
				var bw float64
				bw, err = p.writeBandwidth(size, c.total, c.window)
				rcBw = append(rcBw, bw)
			}
			r.Retransmits += p.a.Stats().Retransmits + p.b.Stats().Retransmits
			p.close()
			if err != nil {
				return nil, fmt.Errorf("%d B: %w", size, err)
			}
		}
		r.UDPLatUsec, r.RCLatUsec = median(udpLat), median(rcLat)
		r.UDPBwMBps, r.RCWriteMBps = median(udpBw), median(rcBw)
		if r.UDPLatUsec > 0 {
			r.LatRatio = r.RCLatUsec / r.UDPLatUsec
		}
		if r.UDPBwMBps > 0 {
			r.BwRatio = r.RCWriteMBps / r.UDPBwMBps
		}
		fmt.Fprintf(os.Stderr, "verbsperf: %d B done\n", size)
		out = append(out, r)
	}
	return out, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// headerBytes is what a RoCEv2 packet adds to its payload inside the UDP
// datagram: BTH, RETH (the largest header of a write) and ICRC.
const headerBytes = roce.BTHSize + roce.RETHSize + roce.ICRCSize

// udpPingPong returns half the mean round trip of one datagram of size
// bytes (plus RoCE's header bytes) each way between two sockets.
func udpPingPong(c config, size, iters int) (float64, error) {
	a, b, err := udpPair(c)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	defer b.Close()
	msg := make([]byte, size+headerBytes)
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, len(msg))
		for i := 0; i < iters+100; i++ {
			n, from, err := b.ReadFromUDPAddrPort(buf)
			if err == nil {
				_, err = b.WriteToUDPAddrPort(buf[:n], from)
			}
			if err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	dst := b.LocalAddr().(*net.UDPAddr).AddrPort()
	buf := make([]byte, len(msg))
	var start time.Time
	for i := 0; i < iters+100; i++ {
		if i == 100 { // warm-up done
			start = time.Now()
		}
		if _, err := a.WriteToUDPAddrPort(msg, dst); err != nil {
			return 0, err
		}
		a.SetReadDeadline(time.Now().Add(time.Second))
		if _, _, err := a.ReadFromUDPAddrPort(buf); err != nil {
			return 0, fmt.Errorf("a datagram was lost or late: %w", err)
		}
	}
	el := time.Since(start)
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(el.Microseconds()) / float64(iters) / 2, nil
}

// udpThroughput returns how many payload MB/s (10^6) one socket moves to
// another in RoCE packets carrying size bytes each (at most the MTU): the
// sender sends total bytes (at most maxWrites datagrams), each datagram
// the payload plus RoCE's header bytes, and the receiver counts what
// arrives (loopback UDP may drop when the receiver falls behind; drops
// count against the rate, as they would against a RoCE sender).
func udpThroughput(c config, size int, total int64) (float64, error) {
	a, b, err := udpPair(c)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	b.SetReadBuffer(4 << 20)
	mtu := min(size, c.mtu.Bytes())
	total = min(total, int64(maxWrites)*int64(mtu))
	got := make(chan int64, 1)
	go func() {
		buf := make([]byte, mtu+headerBytes)
		var n int64
		for {
			b.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			k, _, err := b.ReadFromUDPAddrPort(buf)
			if err != nil {
				break
			}
			n += int64(k - headerBytes)
		}
		got <- n
	}()
	msg := make([]byte, mtu+headerBytes)
	dst := b.LocalAddr().(*net.UDPAddr).AddrPort()
	start := time.Now()
	for sent := int64(0); sent < total; sent += int64(mtu) {
		if _, err := a.WriteToUDPAddrPort(msg, dst); err != nil {
			return 0, err
		}
	}
	n := <-got
	el := time.Since(start) - 200*time.Millisecond // the receiver's final idle deadline
	b.Close()
	if n == 0 || el <= 0 {
		return 0, errors.New("the receiver got nothing")
	}
	return float64(n) / el.Seconds() / 1e6, nil
}

func udpPair(c config) (a, b *net.UDPConn, err error) {
	a, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(c.addrs[0], 0)))
	if err != nil {
		return nil, nil, err
	}
	b, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(c.addrs[1], 0)))
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// pair is two devices with one connected RC QP each, and a memory region
// on each side holding a send and a receive buffer of the largest size.
type pair struct {
	a, b  *ibv.Device
	sides [2]*side
}

type side struct {
	pd   *ibv.PD
	cq   *ibv.CQ
	qp   *ibv.QP
	mr   *ibv.MR
	buf  []byte
	wc   [16]ibv.WC
	wake chan struct{} // the CQ's notify callback's
}

func newPair(c config) (*pair, error) {
	port, err := freeUDPPort(c.addrs)
	if err != nil {
		return nil, err
	}
	p := &pair{}
	if p.a, err = ibv.OpenDevice(ibv.DeviceConfig{Addr: c.addrs[0], Port: port}); err != nil {
		return nil, err
	}
	if p.b, err = ibv.OpenDevice(ibv.DeviceConfig{Addr: c.addrs[1], Port: port}); err != nil {
		p.a.Close()
		return nil, err
	}
	maxSize := 0
	for _, s := range c.sizes {
		maxSize = max(maxSize, s)
	}
	for i, d := range []*ibv.Device{p.a, p.b} {
		s, err := newSide(d, 2*maxSize, c.window)
		if err != nil {
			p.close()
			return nil, err
		}
		p.sides[i] = s
	}
	for i, s := range p.sides {
		peer := p.sides[1-i]
		dev := []*ibv.Device{p.b, p.a}[i]
		if err := connect(s.qp, peer.qp.QPNum(), dev.Addr(), c.mtu, c.window); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// freeUDPPort finds a port free on both addresses.
func freeUDPPort(addrs [2]netip.Addr) (int, error) {
	for try := 0; try < 20; try++ {
		a, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addrs[0], 0)))
		if err != nil {
			return 0, err
		}
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addrs[1], uint16(port))))
		a.Close()
		if err == nil {
			b.Close()
			return port, nil
		}
	}
	return 0, errors.New("no UDP port free on both addresses")
}

func newSide(d *ibv.Device, bufLen, window int) (*side, error) {
	s := &side{buf: make([]byte, bufLen), wake: make(chan struct{}, 1)}
	var err error
	if s.pd, err = d.AllocPD(); err != nil {
		return nil, err
	}
	if s.mr, err = s.pd.RegMR(s.buf, 0, ibv.AccessLocalWrite|ibv.AccessRemoteWrite); err != nil {
		return nil, err
	}
	notify := func() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	if s.cq, err = d.CreateCQ(4*window+16, notify); err != nil {
		return nil, err
	}
	s.qp, err = s.pd.CreateQP(ibv.QPInitAttr{Type: ibv.QPTRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: ibv.QPCap{MaxSendWR: uint32(2*window + 16), MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return s, err
}

// connect takes qp through INIT and RTR to RTS towards the peer QP dqpn on
// the device at dest, with ibv_rc_pingpong's timeouts.
func connect(qp *ibv.QP, dqpn uint32, dest netip.AddrPort, mtu ibv.MTU, window int) error {
	steps := []struct {
		a    ibv.QPAttr
		mask ibv.QPAttrMask
	}{
		{ibv.QPAttr{State: ibv.QPSInit, PortNum: 1, AccessFlags: ibv.AccessRemoteWrite},
			ibv.QPState_ | ibv.QPPKeyIndex | ibv.QPPort | ibv.QPAccessFlags},
		{ibv.QPAttr{State: ibv.QPSRTR, PathMTU: mtu, DestQPNum: dqpn, RQPSN: 0, MaxDestRdAtomic: 1,
			MinRNRTimer: 12, AH: ibv.AHAttr{Dest: dest}},
			ibv.QPState_ | ibv.QPAV | ibv.QPPathMTU | ibv.QPDestQPN | ibv.QPRQPSN | ibv.QPMaxDestRdAtomic | ibv.QPMinRNRTimer},
		{ibv.QPAttr{State: ibv.QPSRTS, SQPSN: 0, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			ibv.QPState_ | ibv.QPTimeout | ibv.QPRetryCnt | ibv.QPRNRRetry | ibv.QPSQPSN | ibv.QPMaxQPRdAtomic},
	}
	for _, st := range steps {
		if err := qp.Modify(&st.a, st.mask); err != nil {
			return fmt.Errorf("modify QP %#x to state %d: %w", qp.QPNum(), st.a.State, err)
		}
	}
	return nil
}

func (p *pair) close() {
	for _, s := range p.sides {
		if s == nil {
			continue
		}
		if s.qp != nil {
			s.qp.Destroy()
		}
		if s.cq != nil {
			s.cq.Destroy()
		}
		if s.mr != nil {
			s.mr.Dereg()
		}
		if s.pd != nil {
			s.pd.Dealloc()
		}
	}
	if p.b != nil {
		p.b.Close()
	}
	if p.a != nil {
		p.a.Close()
	}
}

// spins is how many empty polls a waiter makes, yielding the processor
// after each, before it sleeps until the CQ's notify callback wakes it.
// Unlike a NIC, the device runs on the same CPUs as its users: a waiter
// that never yields starves the device's receive goroutines.
const spins = 200

// wait polls s's CQ until one completion arrives and checks it.
func (s *side) wait(deadline time.Time) (ibv.WC, error) {
	for i := 0; ; i++ {
		if s.cq.Poll(s.wc[:1]) == 1 {
			if wc := s.wc[0]; wc.Status != ibv.WCSuccess {
				return wc, fmt.Errorf("completion %d of QP %#x: status %d", wc.WRID, wc.QPNum, wc.Status)
			}
			return s.wc[0], nil
		}
		if i < spins {
			runtime.Gosched()
			continue
		}
		select {
		case <-s.wake:
		case <-time.After(time.Until(deadline)):
			return ibv.WC{}, errors.New("no completion within the time limit")
		}
	}
}

func (s *side) postRecv(size int) error {
	return s.qp.PostRecv(&ibv.RecvWR{WRID: 1, SGList: []ibv.SGE{{Addr: uint64(len(s.buf) / 2), Length: uint32(size), LKey: s.mr.LKey}}})
}

func (s *side) postSend(op ibv.WROpcode, size int, raddr uint64, rkey uint32, wrid uint64) error {
	return s.qp.PostSend(&ibv.SendWR{WRID: wrid, Opcode: op, Flags: ibv.SendSignaled,
		SGList:     []ibv.SGE{{Addr: 0, Length: uint32(size), LKey: s.mr.LKey}},
		RemoteAddr: raddr, RKey: rkey})
}

// pingPong returns half the mean round trip of size-byte SENDs, after 100
// untimed ones: side 0 sends and waits for the answer; side 1 answers
// every message with one of the same size.
func (p *pair) pingPong(size, iters int) (float64, error) {
	a, b := p.sides[0], p.sides[1]
	deadline := time.Now().Add(2 * time.Minute)
	n := iters + 100
	for _, s := range p.sides {
		if err := s.postRecv(size); err != nil {
			return 0, err
		}
	}
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			for i := 0; i < n; i++ {
				for { // the receive, then (maybe first) the send completion of the previous answer
					wc, err := b.wait(deadline)
					if err != nil {
						return err
					}
					if wc.Opcode == ibv.WCRecv {
						break
					}
				}
				if err := b.postRecv(size); err != nil {
					return err
				}
				if err := b.postSend(ibv.WRSend, size, 0, 0, 2); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	var start time.Time
	for i := 0; i < n; i++ {
		if i == 100 {
			start = time.Now()
		}
		if err := a.postSend(ibv.WRSend, size, 0, 0, 2); err != nil {
			return 0, err
		}
		for got := 0; got < 2; got++ { // the send's completion and the answer, in either order
			wc, err := a.wait(deadline)
			if err != nil {
				return 0, err
			}
			if wc.Opcode == ibv.WCRecv {
				if err := a.postRecv(size); err != nil {
					return 0, err
				}
			}
		}
	}
	el := time.Since(start)
	if err := <-errc; err != nil {
		return 0, err
	}
	// b's last send completion is still in its CQ; drain it.
	b.wait(deadline)
	return float64(el.Nanoseconds()) / 1e3 / float64(iters) / 2, nil
}

// maxWrites bounds the writes of one bandwidth run, so that small sizes
// take seconds, not minutes.
const maxWrites = 200000

// writeBandwidth returns the MB/s (10^6) of size-byte RDMA writes from side
// 0 into side 1's region, total bytes in all (at most maxWrites writes),
// window writes in flight.
func (p *pair) writeBandwidth(size int, total int64, window int) (float64, error) {
	a, b := p.sides[0], p.sides[1]
	deadline := time.Now().Add(5 * time.Minute)
	count := min(max(int(total/int64(size)), 1), maxWrites)
	inflight, done := 0, 0
	start := time.Now()
	for posted := 0; done < count; {
		for inflight < window && posted < count {
			if err := a.postSend(ibv.WRRDMAWrite, size, uint64(len(b.buf)/2), b.mr.RKey, uint64(posted)); err != nil {
				return 0, err
			}
			posted++
			inflight++
		}
		wc, err := a.wait(deadline)
		if err != nil {
			return 0, err
		}
		if wc.Opcode != ibv.WCRDMAWrite {
			return 0, fmt.Errorf("completion opcode %d, want RDMA write", wc.Opcode)
		}
		inflight--
		done++
	}
	el := time.Since(start)
	return float64(count) * float64(size) / el.Seconds() / 1e6, nil
}

func printTables(res []Result) {
	fmt.Printf("%-10s %12s %12s %9s %14s %14s %9s %12s\n", "bytes", "udp usec", "rc usec", "lat x", "udp MB/sec", "write MB/sec", "bw x", "retransmits")
	for _, r := range res {
		udp, ratio := "-", "-"
		if r.UDPLatUsec > 0 {
			udp, ratio = fmt.Sprintf("%.2f", r.UDPLatUsec), fmt.Sprintf("%.2f", r.LatRatio)
		}
		fmt.Printf("%-10d %12s %12.2f %9s %14.1f %14.1f %9.2f %12d\n", r.Size, udp, r.RCLatUsec, ratio, r.UDPBwMBps, r.RCWriteMBps, r.BwRatio, r.Retransmits)
	}
}
