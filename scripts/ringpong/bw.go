package main

// The bandwidth loop (-bw): fabtests' fi_msg_bw, fi_rdm_tagged_bw and
// fi_rma_bw (benchmarks/benchmark_shared.c, bandwidth and bandwidth_rma)
// over the rings, with the same shape:
//
//   - -op send: the client posts -W sends without waiting (FI_INJECT
//     below the endpoint's inject size), then waits for the window's send
//     completions and for the server's 4-byte acknowledgement (bw_tx_comp);
//     the server posts -W receives, waits for them and sends the
//     acknowledgement (bw_rx_comp). After the last message both do it once
//     more, as fabtests does. With -e rdm every message is tagged with its
//     sequence number (fi_rdm_tagged_bw); with -e msg none is (fi_msg_bw).
//   - -op write|read: both sides post -W RMA operations into (or out of)
//     the other's region and wait for their completions, at the same
//     time: fi_rma_bw's read and write tests are bidirectional. The two
//     exchange their regions' keys first, and meet before and after each
//     size with a message each way (ft_sync).
//
// Each side times the -iters operations after -warmup untimed ones and
// reports fabtests' figures for them: MB/sec is 10^6 bytes per second one
// way, usec/xfer the time per operation, Mxfers/sec its inverse.

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/fabricfs/fabricfs/core/ring"
)

// ackLen is the size of the receiver's acknowledgement of a window, as
// fabtests' (ft_tx(ep, remote_fi_addr, 4, ...)).
const ackLen = 4

// bandwidth runs the loop of -op for every size and reports each.
func (s *side) bandwidth(role string) error {
	o := s.o
	var peerKey uint64
	if o.op == "send" {
		s.tagged = s.rdm
	} else {
		// One receive stays posted ahead for the next exchange, as
		// fabtests keeps one (rx_seq one ahead): a message that finds
		// no receive holds up the connection's bytes behind it, and
		// behind the peer's last exchange come the responses to this
		// side's reads.
		if err := s.postRecv(); err != nil {
			return err
		}
		key, err := s.mr.Attr("key")
		if err != nil {
			return err
		}
		got, err := s.exchange(key)
		if err != nil {
			return fmt.Errorf("exchanging the regions' keys: %w", err)
		}
		if peerKey, err = strconv.ParseUint(got, 0, 64); err != nil {
			return fmt.Errorf("the peer's key %q: %w", got, err)
		}
	}
	for k, size := range o.sizes {
		var elapsed time.Duration
		var err error
		last := k == len(o.sizes)-1
		switch {
		case o.op != "send":
			elapsed, err = s.bwRMA(size, peerKey)
		case role == "client":
			elapsed, err = s.bwSend(size)
		default:
			elapsed, err = s.bwRecv(size, last)
		}
		if err != nil {
			return fmt.Errorf("size %d: %w", size, err)
		}
		if role == "client" || !o.quiet {
			reportBW(o, s.mapping, role, size, elapsed)
		}
	}
	return nil
}

// bwSend is the sender's loop of one size (fabtests' client).
func (s *side) bwSend(size int) (time.Duration, error) {
	var start time.Time
	n := s.o.warmup + s.o.iters
	for i, j := 0, 0; i < n; i++ {
		if i == s.o.warmup {
			start = time.Now()
		}
		if err := s.postMsg(size); err != nil {
			return 0, err
		}
		if j++; j == s.o.window {
			if err := s.sendWindowDone(); err != nil {
				return 0, err
			}
			j = 0
		}
	}
	if err := s.sendWindowDone(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// sendWindowDone waits for the window's send completions and then for
// the receiver's acknowledgement (bw_tx_comp). The acknowledgement's
// receive is posted here: it cannot arrive before the window's messages
// have, and a message that finds no receive waits for one.
func (s *side) sendWindowDone() error {
	if err := s.postRecv(); err != nil {
		return err
	}
	if err := s.wait(func() bool { return s.sendsDone == s.sendsPosted }); err != nil {
		return err
	}
	if err := s.wait(func() bool { return s.recvsDone == s.recvsPosted }); err != nil {
		return err
	}
	return s.checkRecv(ackLen)
}

// postMsg posts a send of size bytes without waiting for it.
func (s *side) postMsg(size int) error {
	w := ring.WR{Op: ring.OpSend, Offset: s.txOff, Len: uint64(size)}
	if s.tagged {
		w.Op, w.Tag = ring.OpTSend, s.txTag
		s.txTag++
	}
	return s.postTx(w)
}

// bwRecv is the receiver's loop of one size (fabtests' server). With
// last, the peer may shut down once the final acknowledgement is out.
func (s *side) bwRecv(size int, last bool) (time.Duration, error) {
	var start time.Time
	n := s.o.warmup + s.o.iters
	for i, j := 0, 0; i < n; i++ {
		if i == s.o.warmup {
			start = time.Now()
		}
		if err := s.postRecv(); err != nil {
			return 0, err
		}
		if j++; j == s.o.window {
			if err := s.recvWindowDone(size, false); err != nil {
				return 0, err
			}
			j = 0
		}
	}
	if err := s.recvWindowDone(size, last); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// recvWindowDone waits for the window's receives and acknowledges them
// (bw_rx_comp).
func (s *side) recvWindowDone(size int, last bool) error {
	if err := s.wait(func() bool { return s.recvsDone == s.recvsPosted }); err != nil {
		return err
	}
	if err := s.checkRecv(size); err != nil {
		return err
	}
	s.closing = last
	return s.sendBuf(ackLen)
}

// checkRecv checks the last receive's length and, on an RDM endpoint,
// its source.
func (s *side) checkRecv(size int) error {
	if s.lastRecvLen != uint64(size) {
		return fmt.Errorf("received %d bytes, want %d", s.lastRecvLen, size)
	}
	if s.rdm && s.lastRecvSrc != s.peer {
		return fmt.Errorf("a message came from fi_addr %#x, want the peer's, %d (FI_SOURCE)", s.lastRecvSrc, s.peer)
	}
	return nil
}

// bwRMA is one size of fi_rma_bw on both sides: RMA writes from the
// send buffer into the peer's (region key, the same offset: both sides
// lay their regions out alike), or reads from there into the receive
// buffer. Nothing reaches the peer's receive buffer, where the keys
// arrive.
func (s *side) bwRMA(size int, key uint64) (time.Duration, error) {
	if _, err := s.exchange("sync"); err != nil {
		return 0, err
	}
	w := ring.WR{Op: ring.OpWrite, Offset: s.txOff, Len: uint64(size), RMAAddr: s.txOff, RMAKey: key}
	if s.o.op == "read" {
		w.Op, w.Offset = ring.OpRead, s.rxOff
	}
	done := func() bool { return s.sendsDone == s.sendsPosted }
	var start time.Time
	n := s.o.warmup + s.o.iters
	for i, j := 0, 0; i < n; i++ {
		if i == s.o.warmup {
			start = time.Now()
		}
		if err := s.postTx(w); err != nil {
			return 0, err
		}
		if j++; j == s.o.window {
			if err := s.wait(done); err != nil {
				return 0, err
			}
			j = 0
		}
	}
	if err := s.wait(done); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	// A write's completion may come before its bytes reach the peer
	// (docs/abi.md): the message behind them on the connection says they
	// have, so that neither side closes with the other's writes in flight.
	if _, err := s.exchange("sync"); err != nil {
		return 0, err
	}
	return elapsed, nil
}

// exchange sends msg (untagged, at most the receive buffer's size) and
// returns the peer's message, once both have completed, into the
// receive posted ahead; then it posts the next one.
func (s *side) exchange(msg string) (string, error) {
	copy(s.mr.Mem()[s.txOff:], msg)
	if err := s.postTx(ring.WR{Op: ring.OpSend, Offset: s.txOff, Len: uint64(len(msg))}); err != nil {
		return "", err
	}
	if err := s.wait(func() bool { return s.sendsDone == s.sendsPosted && s.recvsDone == s.recvsPosted }); err != nil {
		return "", err
	}
	if err := s.checkRecv(int(s.lastRecvLen)); err != nil {
		return "", err
	}
	got := string(s.mr.Mem()[s.rxOff:][:s.lastRecvLen])
	return got, s.postRecv()
}

// bwResult is one size's measurement with -bw -json.
type bwResult struct {
	Impl         string  `json:"impl"`
	EP           string  `json:"ep"`
	Op           string  `json:"op"`
	Role         string  `json:"role"`
	Bytes        int     `json:"bytes"`
	Iters        int     `json:"iters"`
	Warmup       int     `json:"warmup"`
	Window       int     `json:"window"`
	Mapping      string  `json:"mapping"`
	TotalBytes   uint64  `json:"total_bytes"`
	TimeSec      float64 `json:"time_s"`
	MBPerSec     float64 `json:"mb_per_sec"`
	UsecPerXfer  float64 `json:"usec_per_xfer"`
	MxfersPerSec float64 `json:"mxfers_per_sec"`
}

// reportBW prints one size's line: fabtests' bandwidth table (show_perf
// with one transfer per iteration), or JSON.
func reportBW(o *options, mapping, role string, size int, elapsed time.Duration) {
	us := float64(elapsed.Nanoseconds()) / 1e3
	r := bwResult{Impl: "fabricfs", EP: o.ep, Op: o.op, Role: role, Bytes: size, Iters: o.iters, Warmup: o.warmup,
		Window: o.window, Mapping: mapping, TotalBytes: uint64(o.iters) * uint64(size), TimeSec: elapsed.Seconds()}
	if us > 0 {
		r.MBPerSec = float64(r.TotalBytes) / us
		r.UsecPerXfer = us / float64(o.iters)
		r.MxfersPerSec = float64(o.iters) / us
	}
	if o.json {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		return
	}
	if !bwHeader {
		fmt.Printf("%-8s%-8s%-12s%-8s%10s%13s%13s\n", "bytes", "iters", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec")
		bwHeader = true
	}
	fmt.Printf("%-8d%-8d%-12d%7.2fs%10.2f%13.2f%13.2f\n", size, o.iters, r.TotalBytes, r.TimeSec, r.MBPerSec, r.UsecPerXfer, r.MxfersPerSec)
	os.Stdout.Sync()
}

// bwHeader: reportBW has printed the table's header.
var bwHeader bool
