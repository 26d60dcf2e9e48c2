// Command ringpong is fi_pingpong over a mounted fabricfs tree: two
// processes, one FI_EP_MSG connection or two FI_EP_RDM endpoints, messages
// moved through the mapped work and completion rings with package
// clients/go/fabricfs (docs/abi.md).
//
//	ringpong -mnt DIR -role server [-e msg|rdm] [-listen 127.0.0.1:0] [flags]
//	ringpong -mnt DIR -role client [-e msg|rdm] -addr HOST:PORT [flags]
//
// With -e msg (the default) the server makes an EQ, a CQ and a PEP
// listening on -listen, prints the PEP's address (HOST:PORT) as the first
// line of its standard output, accepts one endpoint and answers every
// message it receives with one of the same size. The client connects and,
// for each of -sizes, runs -warmup untimed round trips, then -iters timed
// ones. Both sides must be given the same -e, -sizes, -iters and -warmup:
// the message sequence follows from them, as fi_pingpong's does from its
// own options after each control sync.
//
// With -e rdm each side makes an AV, a CQ and an FI_EP_RDM endpoint bound
// to both (the endpoint listens on the domain's address; -listen is for
// msg only). The server prints its endpoint's address (HOST:PORT, from
// ep/N/local) first, as it prints the PEP's for msg. The client inserts it
// into its AV and sends, as its first message, its own address as text
// (ep/N/local, at most 64 bytes: the server's first receive is at least
// that large). The server inserts that address into its AV and answers to
// its fi_addr from then on. So there is no control connection, and the
// client's hello makes rxm's one connection, before any timed message.
// Every receive after the hello must come from the peer's fi_addr
// (FI_SOURCE through the AV), on both sides. There is no shutdown: each
// side closes its endpoint once its sends have completed. A size above the
// endpoint's max_msg_size (16384 for RDM until rendezvous exists) fails
// before anything is sent.
//
// Each side registers one memory region holding a receive buffer and a send
// buffer of the largest size, and keeps one receive posted ahead, reposting
// it as soon as it completes (pp_rx). Sends below the endpoint's
// tx_inject_size carry FI_INJECT and are not waited for (pp_inject); larger
// ones wait for their send completion (pp_tx), as in fi_pingpong.
//
// Waiting polls the CQ ring with fabricfs.CQ.Poll, as fi_pingpong spins on
// fi_cq_read of a FI_WAIT_NONE CQ, but by default it calls sched_yield
// between empty polls: the daemon's threads need a CPU too, and on a small
// machine a pure spin (-yield=false) starves them (see docs/bench.md).
// After -spin without a completion the waiter sleeps on the ring's futex
// (docs/abi.md) until the daemon wakes it.
//
// -engine-cpu N places the side's endpoint in the daemon's engine group of
// CPU N (attr/engine_cpu) before enabling it; run that side with taskset -c
// N and its engine thread runs beside it (scripts/bench.sh -F's
// fabricfs-split).
//
// -bw runs fabtests' bandwidth loop instead of the ping-pong (bw.go):
// -op send is fi_msg_bw (-e msg) or fi_rdm_tagged_bw (-e rdm), -op write
// and -op read are fi_rma_bw -o write|read, each with a window of -W
// operations. Its output is fabtests' bandwidth table, or with -json one
// object per size.
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

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/internal/pptable"
)

// libfabric's operation and completion flags used here.
const (
	fiInject = 1 << 25 // FI_INJECT
	fiSend   = 1 << 11 // FI_SEND (completion flags)
	fiRecv   = 1 << 10 // FI_RECV
	fiRMA    = 1 << 2  // FI_RMA (completion flags of WRITE and READ)

	ctxSend = 1 // op_context of sends
	ctxRecv = 2 // op_context of receives

	minRecv = 64 // fi_pingpong posts receives of at least PP_MAX_CTRL_MSG bytes

	fiECanceled = 125 // FI_ECANCELED

	fiAddrUnspec = ^uint64(0) // FI_ADDR_UNSPEC

	helloMax = minRecv // -e rdm: the client's address, its first message
)

type options struct {
	mnt, role, addr, listen string
	ep                      string // msg or rdm
	prov, domain            string
	sizes                   []int
	iters, warmup           int
	spin, timeout           time.Duration
	json, check, quiet      bool
	yield                   bool
	engineCPU               int
	bw                      bool   // -bw: the bandwidth loop (bw.go)
	window                  int    // -W: operations per window with -bw
	op                      string // -op with -bw: send, write or read
}

func main() {
	var o options
	var sizes string
	flag.StringVar(&o.mnt, "mnt", "/fabric", "the fabricfs mount point")
	flag.StringVar(&o.role, "role", "", "server or client")
	flag.StringVar(&o.addr, "addr", "", "client: the server's address, HOST:PORT (the server's first output line)")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "server, -e msg: the address to listen on")
	flag.StringVar(&o.ep, "e", "msg", "endpoint type: msg (FI_EP_MSG, a connection) or rdm (FI_EP_RDM, addressed through an AV)")
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
	flag.IntVar(&o.engineCPU, "engine-cpu", -1, "the CPU whose engine group serves this side's endpoint (its attr/engine_cpu; -1: the shared groups); with taskset -c on the same CPU, each side's engine runs beside it")
	flag.BoolVar(&o.quiet, "q", false, "server: print only the address line")
	flag.BoolVar(&o.bw, "bw", false, "run fabtests' bandwidth loop (fi_msg_bw, fi_rdm_tagged_bw, fi_rma_bw) instead of the ping-pong")
	flag.IntVar(&o.window, "W", 64, "-bw: operations posted per window before their completions are reaped (fabtests -W)")
	flag.StringVar(&o.op, "op", "send", "-bw: send (fi_msg_bw with -e msg, fi_rdm_tagged_bw with -e rdm), write or read (fi_rma_bw -o write|read)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: ringpong -mnt DIR -role server|client [-e msg|rdm] [-addr HOST:PORT] [flags]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if o.sizes, err = parseSizes(sizes); err != nil {
		fatal(err)
	}
	if o.iters < 1 || o.warmup < 0 {
		fatal(errors.New("-iters must be at least 1 and -warmup at least 0"))
	}
	if o.ep != "msg" && o.ep != "rdm" {
		fatal(fmt.Errorf("-e %s: want msg or rdm", o.ep))
	}
	if o.window < 1 || (o.op != "send" && o.op != "write" && o.op != "read") {
		fatal(errors.New("-W must be at least 1 and -op send, write or read"))
	}
	switch {
	case o.role == "server" && o.ep == "rdm":
		err = serverRDM(&o)
	case o.role == "server":
		err = server(&o)
	case o.role == "client" && o.addr != "" && o.ep == "rdm":
		err = clientRDM(&o)
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
	ep      *fabricfs.EP
	cq      *fabricfs.CQ
	mr      *fabricfs.MR
	rxOff   uint64 // receive buffer in mr
	rxLen   uint64
	txOff   uint64 // send buffer in mr
	inject  uint64 // sends below this carry FI_INJECT (fi_pingpong: size < inject_size)
	mapping string // the tree's attr/mapping: passthrough or symlink
	peer    uint64 // -e rdm: the peer's fi_addr, where sends go
	rdm     bool   // -e rdm: receives must come from peer (FI_SOURCE)
	tagged  bool   // -bw -e rdm -op send: tagged messages, as fi_rdm_tagged_bw
	// txTag and rxTag number the tagged sends and receives: each
	// direction's n-th message carries tag n, as fabtests tags them
	// with its sequence numbers.
	txTag, rxTag uint64

	sendsPosted, sendsDone uint64
	recvsPosted, recvsDone uint64
	lastRecvLen            uint64
	lastRecvSrc            uint64 // src_addr of the last receive: an fi_addr, or FI_ADDR_NOTAVAIL
	// closing: the measurement is over and the peer may shut the
	// connection down, which cancels the receive posted ahead.
	closing bool
	cqes    [16]ring.CQE // wait's: completions are read into it, without allocating
	resched time.Time    // when wait last passed through the Go scheduler
}

// reschedEvery is how long wait polls before it passes through the Go
// scheduler. The runtime preempts a goroutine that has run for 10 ms
// without doing so, with a signal, and its monitor thread then wakes every
// 20 us for a while, on the CPU the other side needs (docs/bench.md,
// "The Go runtime's preemption").
const reschedEvery = 5 * time.Millisecond

// newSide makes the side's CQ and memory region; the endpoint comes later.
func newSide(o *options, d *fabricfs.Domain) (*side, error) {
	maxSize := 0
	for _, n := range o.sizes {
		maxSize = max(maxSize, n)
	}
	rxLen := uint64(max(maxSize, minRecv))
	txOff := (rxLen + 4095) &^ 4095 // the send buffer starts on its own page, as in pp_alloc_msgs
	s := &side{o: o, rxLen: rxLen, txOff: txOff}
	var err error
	// Twice the deepest queue the loop can build (the ping-pong: a
	// reposted receive, an unreaped inject completion, the send; -bw: a
	// window of operations and the acknowledgement): the ring never fills.
	cqSize := 64
	for cqSize < 2*(o.window+2) {
		cqSize *= 2
	}
	if s.cq, err = d.NewCQ(cqSize); err != nil {
		return nil, fmt.Errorf("cq: %w", err)
	}
	access := "FI_SEND,FI_RECV"
	if o.bw && o.op != "send" {
		access += ",FI_READ,FI_WRITE,FI_REMOTE_READ,FI_REMOTE_WRITE" // fi_rma_bw's peers reach each other's region
	}
	if s.mr, err = d.NewMR(int(txOff)+max(maxSize, minRecv), access); err != nil {
		return nil, fmt.Errorf("mr: %w", err)
	}
	if s.mapping, err = s.mr.Attr("mapping"); err != nil {
		return nil, err
	}
	return s, nil
}

// placement is the endpoint attribute -engine-cpu asks for, as a name and
// a value, or nothing.
func (s *side) placement() []string {
	if s.o.engineCPU < 0 {
		return nil
	}
	return []string{"engine_cpu", strconv.Itoa(s.o.engineCPU)}
}

// setup places the endpoint's engine group (-engine-cpu), binds and
// enables the endpoint, and maps its rings.
func (s *side) setup(eq *fabricfs.EQ) error {
	if p := s.placement(); p != nil {
		if err := s.ep.SetAttr(p[0], p[1]); err != nil {
			return err
		}
	}
	if err := s.ep.Setup(eq, s.cq); err != nil {
		return err
	}
	return s.ready()
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
	if v, err = s.ep.Attr("max_msg_size"); err != nil {
		return err
	}
	maxMsg, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		return fmt.Errorf("max_msg_size %q: %w", v, err)
	}
	for _, n := range s.o.sizes {
		if uint64(n) > maxMsg {
			return fmt.Errorf("size %d is above the endpoint's max_msg_size %d", n, maxMsg)
		}
	}
	if _, err := s.ep.Tx(); err != nil {
		return err
	}
	if _, err := s.ep.Rx(); err != nil {
		return err
	}
	if s.o.bw {
		return nil // the bandwidth loop posts its receives itself
	}
	return s.postRecv()
}

// postRecv posts the receive, from any source (the endpoints have
// FI_DIRECTED_RECV, so an RDM receive's addr must be FI_ADDR_UNSPEC).
// With tagged, it is a tagged receive of the next tag.
func (s *side) postRecv() error {
	w := ring.WR{Op: ring.OpRecv, Context: ctxRecv, Offset: s.rxOff, Len: s.rxLen, Addr: fiAddrUnspec}
	if s.tagged {
		w.Op, w.Tag = ring.OpTRecv, s.rxTag
		s.rxTag++
	}
	if err := s.ep.Post(s.mr, w); err != nil {
		return err
	}
	s.recvsPosted++
	return nil
}

func (s *side) send(size int, iter uint64) error {
	if s.o.check {
		fill(s.mr.Mem()[s.txOff:][:size], iter)
	}
	return s.sendBuf(size)
}

// sendBuf sends the first size bytes of the send buffer to the peer.
func (s *side) sendBuf(size int) error {
	w := ring.WR{Op: ring.OpSend, Offset: s.txOff, Len: uint64(size)}
	if s.tagged {
		w.Op, w.Tag = ring.OpTSend, s.txTag
		s.txTag++
	}
	if err := s.postTx(w); err != nil {
		return err
	}
	if w.Len < s.inject {
		return nil // pp_inject: no wait; its completion is reaped with the others
	}
	return s.wait(func() bool { return s.sendsDone == s.sendsPosted })
}

// postTx posts w, a send or an RMA operation of the send buffer's first
// w.Len bytes, to the peer, with FI_INJECT below the endpoint's inject
// size (fabtests: transfer_size < inject_size) unless it is a READ. While
// the tx ring is full it reaps completions and tries again, as fabtests'
// ft_post_tx does on -FI_EAGAIN.
func (s *side) postTx(w ring.WR) error {
	w.Context, w.Addr = ctxSend, s.peer
	if w.Len < s.inject && w.Op != ring.OpRead {
		w.Flags |= fiInject
	}
	for {
		err := s.ep.Post(s.mr, w)
		if err == nil {
			s.sendsPosted++
			return nil
		}
		if !errors.Is(err, syscall.EAGAIN) {
			return err
		}
		if err := s.reap(s.cqes[:s.cq.Read(s.cqes[:])]); err != nil {
			return err
		}
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
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
	if s.rdm && s.lastRecvSrc != s.peer {
		return fmt.Errorf("message %d came from fi_addr %#x, want the peer's, %d (FI_SOURCE)", iter, s.lastRecvSrc, s.peer)
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
		if cs := s.cqes[:s.cq.Read(s.cqes[:])]; len(cs) > 0 {
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
		now := time.Now()
		if now.Sub(s.resched) >= reschedEvery {
			runtime.Gosched()
			s.resched = now
		}
		waited := now.Sub(start)
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
		case c.Context == ctxSend && c.Flags&(fiSend|fiRMA) != 0:
			s.sendsDone++
		case c.Context == ctxRecv && c.Flags&fiRecv != 0:
			s.recvsDone++
			s.lastRecvLen, s.lastRecvSrc = c.Len, c.SrcAddr
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

func openDomain(o *options) (*fabricfs.Domain, error) {
	t, err := fabricfs.Open(o.mnt)
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
	if err := s.setup(eq); err != nil {
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
	if err := s.setup(eq); err != nil {
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

// openRDM makes an AV and a side with an FI_EP_RDM endpoint bound to it,
// ready. Close the side before the AV.
func openRDM(o *options) (*side, *fabricfs.AV, error) {
	d, err := openDomain(o)
	if err != nil {
		return nil, nil, err
	}
	av, err := d.NewAV()
	if err != nil {
		return nil, nil, fmt.Errorf("av: %w", err)
	}
	s, err := newSide(o, d)
	if err != nil {
		av.Close()
		return nil, nil, err
	}
	s.rdm = true
	if s.ep, err = d.NewRDM(av, s.cq, s.placement()...); err == nil {
		err = s.ready()
	}
	if err != nil {
		s.close()
		av.Close()
		return nil, nil, fmt.Errorf("rdm endpoint: %w", err)
	}
	return s, av, nil
}

// serverRDM is the server of -e rdm: it prints its endpoint's address,
// learns the client's from the client's first message, then answers.
func serverRDM(o *options) error {
	s, av, err := openRDM(o)
	if err != nil {
		return err
	}
	defer av.Close() // after s.close: the endpoint is bound to it
	defer s.close()
	if o.bw { // the hello's receive (ready posts none with -bw)
		if err := s.postRecv(); err != nil {
			return err
		}
	}
	local, err := s.ep.Local()
	if err != nil {
		return err
	}
	fmt.Println(strings.TrimPrefix(local, "fi_sockaddr_in://"))
	os.Stdout.Sync()

	// The hello: the client's address.
	if err := s.wait(func() bool { return s.recvsDone == s.recvsPosted }); err != nil {
		return fmt.Errorf("waiting for the client's address: %w", err)
	}
	peer := string(s.mr.Mem()[s.rxOff:][:s.lastRecvLen])
	if s.peer, err = av.Insert(peer); err != nil {
		return fmt.Errorf("the client's first message %q is not an address: %w", peer, err)
	}
	if !o.bw { // the ping-pong's receive posted ahead
		if err := s.postRecv(); err != nil {
			return err
		}
	}
	if err := s.run(o, "server"); err != nil {
		return err
	}
	return s.drain()
}

// clientRDM is the client of -e rdm: it inserts the server's address,
// sends its own as its first message, then runs the round trips.
func clientRDM(o *options) error {
	s, av, err := openRDM(o)
	if err != nil {
		return err
	}
	defer av.Close()
	defer s.close()
	if s.peer, err = av.Insert(o.addr); err != nil {
		return fmt.Errorf("inserting the server's address: %w", err)
	}
	local, err := s.ep.Local()
	if err != nil {
		return err
	}
	if len(local) > helloMax {
		return fmt.Errorf("this endpoint's address %q is longer than %d bytes", local, helloMax)
	}
	copy(s.mr.Mem()[s.txOff:], local)
	if err := s.sendBuf(len(local)); err != nil {
		return fmt.Errorf("sending this endpoint's address: %w", err)
	}
	// An injected send's bytes are copied when the daemon takes the
	// request (docs/abi.md), and the first message may reuse the buffer at
	// once (with -check): wait for the hello's completion.
	if err := s.wait(func() bool { return s.sendsDone == s.sendsPosted }); err != nil {
		return fmt.Errorf("sending this endpoint's address: %w", err)
	}
	if err := s.run(o, "client"); err != nil {
		return err
	}
	return s.drain()
}

// run does the timed round trips of every size (with -bw, the bandwidth
// loop of bw.go instead): the client sends first and
// the server answers. Before the server's very last answer it sets closing:
// the client may shut down as soon as that answer is out.
func (s *side) run(o *options, role string) error {
	if o.bw {
		return s.bandwidth(role)
	}
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
func waitShutdown(eq *fabricfs.EQ, timeout time.Duration) {
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
	EP           string  `json:"ep"`
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

var table = pptable.Table{W: os.Stdout}

// report prints one size's line: fi_pingpong's table, or JSON.
func report(o *options, mapping, role string, size int, elapsed time.Duration) {
	if !o.json {
		table.Row(size, o.iters, int64(o.iters), elapsed)
		return
	}
	us := float64(elapsed.Nanoseconds()) / 1e3
	r := result{Impl: "fabricfs", EP: o.ep, Role: role, Bytes: size, Iters: o.iters, Warmup: o.warmup, Mapping: mapping,
		TotalBytes: uint64(o.iters) * uint64(size) * 2, TimeSec: elapsed.Seconds()}
	r.MBPerSec = float64(r.TotalBytes) / us
	r.UsecPerXfer = us / float64(o.iters) / 2
	r.MxfersPerSec = 1 / r.UsecPerXfer
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
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
// FUTEX_WAIT: the Go scheduler does not see the system call, so the
// goroutine keeps its thread and waking up is one thread switch, as for a
// C client, rather than a hand-off of the thread's P to another thread and
// back. The caller re-checks the ring whatever happened.
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
