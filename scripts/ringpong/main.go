// Command ringpong is fi_pingpong over a mounted fabricfs tree: two
// processes, one FI_EP_MSG connection, messages moved through the mapped
// work and completion rings with package fs/client (docs/abi.md).
//
//	ringpong -mnt DIR -role server [-listen 127.0.0.1:0] [flags]
//	ringpong -mnt DIR -role client -addr HOST:PORT [flags]
//
// The server makes an EQ, a CQ and a PEP listening on -listen, prints the
// PEP's address (HOST:PORT) as the first line of its standard output,
// accepts one endpoint and answers every message it receives with one of
// the same size. The client connects and, for each of -sizes, runs -warmup
// untimed round trips, then -iters timed ones. Both sides must be given the
// same -sizes, -iters and -warmup: the message sequence follows from them,
// as fi_pingpong's does from its own options after each control sync.
//
// Each side registers one memory region holding a receive buffer and a send
// buffer of the largest size, and keeps one receive posted ahead, reposting
// it as soon as it completes (pp_rx). Sends below the endpoint's
// tx_inject_size carry FI_INJECT and are not waited for (pp_inject); larger
// ones wait for their send completion (pp_tx), as in fi_pingpong.
//
// Waiting polls the CQ ring with client.CQ.Poll, as fi_pingpong spins on
// fi_cq_read of a FI_WAIT_NONE CQ, but by default it calls sched_yield
// between empty polls: the daemon's threads need a CPU too, and on a small
// machine a pure spin (-yield=false) starves them (see docs/bench.md).
// After -spin without a completion the waiter sleeps on the ring's futex
// (docs/abi.md) until the daemon wakes it.
//
// The output is fi_pingpong's table (util/pingpong.c show_perf): time is
// the timed iterations' wall time, MB/sec is 10^6 bytes per second counting
// both directions, usec/xfer is half a round trip. With -json each size is
// one JSON object per line instead.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/fs/client"
)

// libfabric's operation and completion flags used here.
const (
	fiInject = 1 << 25 // FI_INJECT
	fiSend   = 1 << 11 // FI_SEND (completion flags)
	fiRecv   = 1 << 10 // FI_RECV

	ctxSend = 1 // op_context of sends
	ctxRecv = 2 // op_context of receives

	minRecv = 64 // fi_pingpong posts receives of at least PP_MAX_CTRL_MSG bytes

	fiECanceled = 125 // FI_ECANCELED
)

type options struct {
	mnt, role, addr, listen string
	prov, domain            string
	sizes                   []int
	iters, warmup           int
	spin, timeout           time.Duration
	json, check, quiet      bool
	yield                   bool
}

func main() {
	var o options
	var sizes string
	flag.StringVar(&o.mnt, "mnt", "/fabric", "the fabricfs mount point")
	flag.StringVar(&o.role, "role", "", "server or client")
	flag.StringVar(&o.addr, "addr", "", "client: the server's address, HOST:PORT (the server's first output line)")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "server: the address to listen on")
	flag.StringVar(&o.prov, "prov", "tcp", "provider directory")
	flag.StringVar(&o.domain, "domain", "lo", "domain directory")
	flag.StringVar(&sizes, "sizes", "1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576",
		"message sizes in bytes, comma-separated (the same on both sides)")
	flag.IntVar(&o.iters, "iters", 1000, "timed round trips per size (the same on both sides)")
	flag.IntVar(&o.warmup, "warmup", 100, "untimed round trips before each size (the same on both sides)")
	flag.DurationVar(&o.spin, "spin", time.Millisecond, "poll the CQ ring this long before sleeping on its futex (0: sleep at once; negative: never sleep)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up when one completion takes longer than this")
	flag.BoolVar(&o.json, "json", false, "print one JSON object per size instead of the table")
	flag.BoolVar(&o.check, "check", false, "fill and verify every message (fi_pingpong -c); slows the loop")
	flag.BoolVar(&o.yield, "yield", true, "call sched_yield between empty polls of the CQ ring, so that the daemon's threads get the CPU (-yield=false: spin like fi_pingpong)")
	flag.BoolVar(&o.quiet, "q", false, "server: print only the address line")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: ringpong -mnt DIR -role server|client [-addr HOST:PORT] [flags]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	runtime.LockOSThread() // see sleep
	var err error
	if o.sizes, err = parseSizes(sizes); err != nil {
		fatal(err)
	}
	if o.iters < 1 || o.warmup < 0 {
		fatal(errors.New("-iters must be at least 1 and -warmup at least 0"))
	}
	switch {
	case o.role == "server":
		err = server(&o)
	case o.role == "client" && o.addr != "":
		err = clientSide(&o)
	case o.role == "client":
		err = errors.New("the client needs -addr HOST:PORT")
	default:
		err = errors.New("-role must be server or client")
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "ringpong: %v\n", err)
	os.Exit(1)
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-sizes: bad size %q", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-sizes: no size")
	}
	return out, nil
}

// side is one end of the ping-pong: its endpoint, CQ and memory region, and
// the counts of the operations it posted and saw complete.
type side struct {
	o       *options
	ep      *client.EP
	cq      *client.CQ
	mr      *client.MR
	rxOff   uint64 // receive buffer in mr
	rxLen   uint64
	txOff   uint64 // send buffer in mr
	inject  uint64 // sends below this carry FI_INJECT (fi_pingpong: size < inject_size)
	mapping string // the tree's attr/mapping: passthrough or symlink

	sendsPosted, sendsDone uint64
	recvsPosted, recvsDone uint64
	lastRecvLen            uint64
	// closing: the measurement is over and the peer may shut the
	// connection down, which cancels the receive posted ahead.
	closing bool
}

// newSide makes the side's CQ and memory region; the endpoint comes later.
func newSide(o *options, d *client.Domain) (*side, error) {
	maxSize := 0
	for _, n := range o.sizes {
		maxSize = max(maxSize, n)
	}
	rxLen := uint64(max(maxSize, minRecv))
	txOff := (rxLen + 4095) &^ 4095 // the send buffer starts on its own page, as in pp_alloc_msgs
	s := &side{o: o, rxLen: rxLen, txOff: txOff}
	var err error
	// Twice the deepest queue the loop can build (a reposted receive, an
	// unreaped inject completion, the send): the ring never fills.
	if s.cq, err = d.NewCQ(64); err != nil {
		return nil, fmt.Errorf("cq: %w", err)
	}
	if s.mr, err = d.NewMR(int(txOff)+max(maxSize, minRecv), "FI_SEND,FI_RECV"); err != nil {
		return nil, fmt.Errorf("mr: %w", err)
	}
	if s.mapping, err = s.mr.Attr("mapping"); err != nil {
		return nil, err
	}
	return s, nil
}

// ready finishes the endpoint's part once it is enabled: the rings are
// mapped and the first receive is posted, before any message can arrive.
func (s *side) ready() error {
	v, err := s.ep.Attr("tx_inject_size")
	if err != nil {
		return err
	}
	if s.inject, err = strconv.ParseUint(v, 0, 64); err != nil {
		return fmt.Errorf("tx_inject_size %q: %w", v, err)
	}
	if _, err := s.ep.Tx(); err != nil {
		return err
	}
	if _, err := s.ep.Rx(); err != nil {
		return err
	}
	return s.postRecv()
}

func (s *side) postRecv() error {
	if err := s.ep.PostRecv(s.mr, s.rxOff, s.rxLen, ctxRecv, 0); err != nil {
		return err
	}
	s.recvsPosted++
	return nil
}

func (s *side) send(size int, iter uint64) error {
	if s.o.check {
		fill(s.mr.Mem()[s.txOff:][:size], iter)
	}
	var flags uint64
	if uint64(size) < s.inject {
		flags = fiInject
	}
	if err := s.ep.PostSend(s.mr, s.txOff, uint64(size), ctxSend, flags); err != nil {
		return err
	}
	s.sendsPosted++
	if flags&fiInject != 0 {
		return nil // pp_inject: no wait; its completion is reaped with the others
	}
	return s.wait(func() bool { return s.sendsDone == s.sendsPosted })
}

// recv waits for the next message, checks it and reposts the receive.
func (s *side) recv(size int, iter uint64) error {
	// One receive is posted at a time, so this is the completion of the
	// receive posted last; it may have been reaped while a send waited.
	if err := s.wait(func() bool { return s.recvsDone == s.recvsPosted }); err != nil {
		return err
	}
	if s.lastRecvLen != uint64(size) {
		return fmt.Errorf("received %d bytes, want %d", s.lastRecvLen, size)
	}
	if s.o.check {
		if i := verify(s.mr.Mem()[s.rxOff:][:size], iter); i >= 0 {
			return fmt.Errorf("message %d of %d bytes: byte %d is wrong", iter, size, i)
		}
	}
	return s.postRecv()
}

// wait takes completions until done says so: it polls the ring (yielding
// the CPU between empty polls with -yield) for -spin, then sleeps on the
// ring's futex, and fails after -timeout without a completion.
func (s *side) wait(done func() bool) error {
	r := s.cq.Ring()
	start := time.Now()
	for polls := 1; ; polls++ {
		if cs := s.cq.Poll(16); len(cs) > 0 {
			if err := s.reap(cs); err != nil {
				return err
			}
			if done() {
				return nil
			}
			start = time.Now()
			continue
		}
		if done() {
			return nil
		}
		if s.o.yield {
			syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		} else if polls%64 != 0 {
			continue // a pure spin looks at the clock less often
		}
		waited := time.Since(start)
		if waited > s.o.timeout {
			return fmt.Errorf("no completion for %v: sends %d posted %d done, receives %d posted %d done (ep err: %s)",
				s.o.timeout, s.sendsPosted, s.sendsDone, s.recvsPosted, s.recvsDone, s.ep.Err())
		}
		if s.o.spin >= 0 && waited >= s.o.spin {
			if r.Flags()&ring.Dead != 0 {
				return fmt.Errorf("%s: ring is dead (err: %s)", s.cq.Name(), s.cq.Err())
			}
			sleep(r, s.o.timeout-waited)
		}
	}
}

func (s *side) reap(cs []ring.CQE) error {
	for _, c := range cs {
		// Once closing, the peer's shutdown cancels what is still posted.
		canceled := c.Err == -fiECanceled && s.closing
		if c.Err != 0 && !canceled {
			return fmt.Errorf("completion op_context=%#x flags=%#x error %d (olen %d; ep err: %s)", c.Context, c.Flags, c.Err, c.OLen, s.ep.Err())
		}
		switch {
		case c.Context == ctxSend && c.Flags&fiSend != 0:
			s.sendsDone++
		case c.Context == ctxRecv && c.Flags&fiRecv != 0:
			s.recvsDone++
			s.lastRecvLen = c.Len
		default:
			return fmt.Errorf("unexpected completion op_context=%#x flags=%#x", c.Context, c.Flags)
		}
	}
	return nil
}

// drain waits until every send posted has completed, so that nothing is in
// flight when the endpoint goes.
func (s *side) drain() error {
	s.closing = true
	return s.wait(func() bool { return s.sendsDone == s.sendsPosted })
}

func (s *side) close() {
	if s.ep != nil {
		s.ep.Close()
	}
	s.mr.Close()
	s.cq.Close()
}

func openDomain(o *options) (*client.Domain, error) {
	t, err := client.Open(o.mnt)
	if err != nil {
		return nil, err
	}
	return t.Domain(o.prov, o.domain), nil
}

func server(o *options) error {
	d, err := openDomain(o)
	if err != nil {
		return err
	}
	eq, err := d.NewEQ()
	if err != nil {
		return fmt.Errorf("eq: %w", err)
	}
	defer eq.Close()
	pep, err := d.NewPEP()
	if err != nil {
		return fmt.Errorf("pep: %w", err)
	}
	defer pep.Close() // after s.close: the accepted endpoint lives as long as the pep
	s, err := newSide(o, d)
	if err != nil {
		return err
	}
	defer s.close()
	local, err := pep.Listen(eq, o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Println(strings.TrimPrefix(local, "fi_sockaddr_in://"))
	os.Stdout.Sync()

	if s.ep, err = pep.Request(); err != nil {
		return fmt.Errorf("connection request: %w", err)
	}
	if err := s.ep.Setup(eq, s.cq); err != nil {
		return err
	}
	if err := s.ready(); err != nil {
		return err
	}
	if err := s.ep.Ctl("accept"); err != nil {
		return err
	}
	if err := eq.WaitConnected(o.timeout, s.ep); err != nil {
		return err
	}
	if err := s.run(o, "server"); err != nil {
		return err
	}
	if err := s.drain(); err != nil {
		return err
	}
	// The client shuts the connection down once it has the last answer.
	waitShutdown(eq, o.timeout)
	return nil
}

func clientSide(o *options) error {
	d, err := openDomain(o)
	if err != nil {
		return err
	}
	eq, err := d.NewEQ()
	if err != nil {
		return fmt.Errorf("eq: %w", err)
	}
	defer eq.Close()
	s, err := newSide(o, d)
	if err != nil {
		return err
	}
	defer s.close()
	if s.ep, err = d.NewEP(); err != nil {
		return fmt.Errorf("ep: %w", err)
	}
	if err := s.ep.Setup(eq, s.cq); err != nil {
		return err
	}
	if err := s.ready(); err != nil {
		return err
	}
	if err := s.ep.Ctl("connect " + o.addr); err != nil {
		return err
	}
	if err := eq.WaitConnected(o.timeout, s.ep); err != nil {
		return err
	}
	if err := s.run(o, "client"); err != nil {
		return err
	}
	if err := s.drain(); err != nil {
		return err
	}
	return s.ep.Ctl("shutdown")
}

// run does the timed round trips of every size: the client sends first and
// the server answers. Before the server's very last answer it sets closing:
// the client may shut down as soon as that answer is out.
func (s *side) run(o *options, role string) error {
	var iter uint64
	for k, size := range o.sizes {
		var start time.Time
		for i := 0; i < o.warmup+o.iters; i++ {
			if i == o.warmup {
				start = time.Now()
			}
			first, second := s.send, s.recv
			if role == "server" {
				first, second = s.recv, s.send
			}
			if err := first(size, iter); err != nil {
				return fmt.Errorf("size %d: %w", size, err)
			}
			iter++
			if role == "server" && k == len(o.sizes)-1 && i == o.warmup+o.iters-1 {
				s.closing = true
			}
			if err := second(size, iter); err != nil {
				return fmt.Errorf("size %d: %w", size, err)
			}
			iter++
		}
		if role == "client" || !o.quiet {
			report(o, s.mapping, role, size, time.Since(start))
		}
	}
	return nil
}

// waitShutdown reads the EQ until the peer's shutdown arrives, or for at
// most timeout.
func waitShutdown(eq *client.EQ, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := eq.Events()
			if err != nil {
				return
			}
			for _, e := range ev {
				if strings.HasPrefix(e, "shutdown") || strings.HasPrefix(e, "error") {
					return
				}
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// result is one size's measurement, the JSON form of a table row.
type result struct {
	Impl         string  `json:"impl"`
	Role         string  `json:"role"`
	Bytes        int     `json:"bytes"`
	Iters        int     `json:"iters"`
	Warmup       int     `json:"warmup"`
	Mapping      string  `json:"mapping"`
	TotalBytes   uint64  `json:"total_bytes"`
	TimeSec      float64 `json:"time_s"`
	MBPerSec     float64 `json:"mb_per_sec"`
	UsecPerXfer  float64 `json:"usec_per_xfer"`
	MxfersPerSec float64 `json:"mxfers_per_sec"`
}

var header = true

// report prints one size's line: fi_pingpong's show_perf with
// xfers_per_iter 2, or JSON.
func report(o *options, mapping, role string, size int, elapsed time.Duration) {
	us := float64(elapsed.Nanoseconds()) / 1e3
	r := result{Impl: "fabricfs", Role: role, Bytes: size, Iters: o.iters, Warmup: o.warmup, Mapping: mapping,
		TotalBytes: uint64(o.iters) * uint64(size) * 2, TimeSec: elapsed.Seconds()}
	r.MBPerSec = float64(r.TotalBytes) / us
	r.UsecPerXfer = us / float64(o.iters) / 2
	r.MxfersPerSec = 1 / r.UsecPerXfer
	if o.json {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		return
	}
	if header {
		fmt.Printf("%-8s%-8s%-9s%-8s%8s %10s%13s%13s\n", "bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec")
		header = false
	}
	fmt.Printf("%-8s%-8s=%-8s%-8s%8.2fs%10.2f%11.2f%11.2f\n", sizeStr(uint64(size)), cntStr(uint64(o.iters)), cntStr(uint64(o.iters)),
		sizeStr(r.TotalBytes), r.TimeSec, r.MBPerSec, r.UsecPerXfer, r.MxfersPerSec)
}

// sizeStr is pingpong.c's size_str: 1k, 1.5m...
func sizeStr(n uint64) string {
	base, mag := uint64(1), ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	var frac uint64
	if n/base < 10 {
		frac = n % base * 10 / base
	}
	if frac != 0 {
		return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

// cntStr is pingpong.c's cnt_str: 10k, 1m...
func cntStr(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.FormatUint(n, 10)
}

// fill writes message iter's content; verify returns the first wrong byte
// of it, or -1.
func fill(b []byte, iter uint64) {
	for i := range b {
		b[i] = byte(uint64(i)*7 + iter)
	}
}

func verify(b []byte, iter uint64) int {
	for i := range b {
		if b[i] != byte(uint64(i)*7+iter) {
			return i
		}
	}
	return -1
}

// sleep is the consumer's sleep of docs/abi.md (ring.Ring.Sleep) with a raw
// FUTEX_WAIT on the thread main locked: the Go scheduler does not see the
// system call, so waking up is one thread switch, as for a C client, rather
// than a hand-off of the thread's P to another thread and back. The caller
// re-checks the ring whatever happened.
func sleep(r *ring.Ring, timeout time.Duration) {
	w := r.WakeWord()
	v := atomic.LoadUint32(w)
	r.SetFlags(ring.NeedWakeup)
	if r.Len() == 0 && r.Flags()&ring.Dead == 0 {
		ts := syscall.NsecToTimespec(int64(timeout))
		syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), 0 /* FUTEX_WAIT */, uintptr(v), uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
	r.ClearFlags(ring.NeedWakeup)
}
