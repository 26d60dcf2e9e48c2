package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// fi_pingpong's sizes, tag and data pattern, by their names in
// util/pingpong.c.
const (
	ppMaxCtrlMsg = 64            // PP_MAX_CTRL_MSG: receives are at least this long
	ppMaxDataMsg = 1<<22 + 1<<21 // PP_MAX_DATA_MSG: the transfer size without -S N
	ppTag        = 1234          // TAG: the tag of -m tagged
	integSeed    = 7             // INTEG_SEED: message i starts i*7 letters into the alphabet

	// integ_alphabet: the letters of the -c pattern.
	integAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

// Completion contexts: which operation a completion belongs to.
const (
	ctxTx  = 1 // a send of the ping-pong
	ctxRx  = 2 // a receive
	ctxFin = 3 // the finalize's send
)

// xfer is a transmit mode (-m): the operations that move a message.
type xfer struct {
	caps           string // the capability asked of fi_getinfo
	sendOp, recvOp uint8  // work request ops (docs/abi.md)
	tag            uint64
}

var xfers = map[string]xfer{
	"msg":    {caps: "FI_MSG", sendOp: ring.OpSend, recvOp: ring.OpRecv},
	"tagged": {caps: "FI_TAGGED", sendOp: ring.OpTSend, recvOp: ring.OpTRecv, tag: ppTag},
}

// session is one side's data path: a CQ for both directions, one memory
// region holding the receive buffer, the send buffer and the "fin"
// message (pp_alloc_msgs), the endpoint, and the counts of operations
// posted and completed (fi_pingpong's tx_seq, tx_cq_cntr, rx_seq,
// rx_cq_cntr).
type session struct {
	o    *options
	d    *fabricfs.Domain
	x    xfer
	cq   *fabricfs.CQ
	mr   *fabricfs.MR
	ep   *fabricfs.EP
	dest uint64 // fi_addr of sends: 0 (ignored) on a connected endpoint

	inject               uint64 // tx_attr.inject_size: smaller sends are injected
	txSize, rxSize       uint64 // ct->tx_size, ct->rx_size
	rxOff, txOff, finOff uint64 // the buffers in mr

	txPosted, txDone, rxPosted, rxDone uint64
	finPosted, finDone                 uint64
	rxLen                              uint64 // the length of the last message received
	fillIter, checkIter                uint32 // pp_fill_buf's and pp_check_buf's message counters
}

func newSession(o *options, d *fabricfs.Domain, x xfer) (*session, error) {
	cq, err := d.NewCQ(0)
	if err != nil {
		return nil, fmt.Errorf("cq: %w", err)
	}
	return &session{o: o, d: d, x: x, cq: cq}, nil
}

func (s *session) close() {
	if s.ep != nil {
		s.ep.Close()
	}
	if s.mr != nil {
		s.mr.Close()
	}
	s.cq.Close()
}

// attach makes ep the session's endpoint, as pp_alloc_active_res and
// pp_init_ep do: it writes the flavour's binds and the CQ's, enables the
// endpoint, sizes and registers the buffers, maps the rings and posts the
// first receive, so that one is waiting before the peer can send.
func (s *session) attach(ep *fabricfs.EP, binds ...string) error {
	s.ep = ep
	for _, c := range append(binds, "bind cq "+s.cq.ID()+" send,recv", "enable") {
		if err := ep.Ctl(c); err != nil {
			return err
		}
	}
	var err error
	if s.inject, err = s.attrUint("tx_inject_size"); err != nil {
		return err
	}
	maxMsg, err := s.attrUint("max_msg_size")
	if err != nil {
		return err
	}
	s.txSize = min(s.transferSize(), maxMsg)
	s.rxSize = s.txSize
	if err := s.allocMsgs(); err != nil {
		return err
	}
	if _, err := ep.Tx(); err != nil {
		return err
	}
	if _, err := ep.Rx(); err != nil {
		return err
	}
	return s.postRecv()
}

func (s *session) attrUint(name string) (uint64, error) {
	v, err := s.ep.Attr(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/attr/%s: %q: %w", s.ep.Dir, name, v, err)
	}
	return n, nil
}

// transferSize is the largest message -S asks for, before the provider's
// max_msg_size caps it.
func (s *session) transferSize() uint64 {
	switch s.o.sizes.kind {
	case sizesOne, sizesList:
		return uint64(maxInt(s.o.sizes.sizes))
	}
	return ppMaxDataMsg
}

// allocMsgs lays out and registers the region: the receive buffer at 0,
// the send buffer on the next page, then the "fin" message (fi_pingpong
// reuses the send buffer; a buffer of its own is simpler to reason about).
func (s *session) allocMsgs() error {
	page := uint64(os.Getpagesize())
	rxLen := max(s.rxSize, ppMaxCtrlMsg)
	s.txOff = (rxLen + page - 1) &^ (page - 1)
	s.finOff = s.txOff + max(s.txSize, ppMaxCtrlMsg)
	mr, err := s.d.NewMR(int(s.finOff+ppMaxCtrlMsg), "FI_SEND,FI_RECV")
	if err != nil {
		return fmt.Errorf("mr: %w", err)
	}
	s.mr = mr
	return nil
}

// postRecv posts the receive fi_pingpong always keeps posted: the whole
// receive buffer, whatever the size being tested.
func (s *session) postRecv() error {
	w := ring.WR{Op: s.x.recvOp, Context: ctxRx, Offset: s.rxOff, Len: max(s.rxSize, ppMaxCtrlMsg), Tag: s.x.tag,
		Addr: uint64(fi.ADDR_UNSPEC)} // from anyone (FI_EP_RDM with FI_DIRECTED_RECV)
	if err := s.ep.Post(s.mr, w); err != nil {
		return fmt.Errorf("posting a receive: %w", err)
	}
	s.rxPosted++
	return nil
}

// send sends size bytes of the send buffer, filled with the -c pattern:
// below inject_size with FI_INJECT and without waiting (pp_inject),
// otherwise waiting for its completion (pp_tx).
func (s *session) send(size int) error {
	buf := s.mr.Mem()[s.txOff:][:size]
	if s.o.check {
		fillBuf(buf, s.fillIter)
		s.fillIter++
	}
	var flags uint64
	if uint64(size) < s.inject {
		flags = uint64(fi.INJECT)
	}
	w := ring.WR{Op: s.x.sendOp, Flags: flags, Context: ctxTx, Offset: s.txOff, Len: uint64(size), Addr: s.dest, Tag: s.x.tag}
	if err := s.ep.Post(s.mr, w); err != nil {
		return fmt.Errorf("posting a send: %w", err)
	}
	s.txPosted++
	if flags != 0 {
		return nil // its completion is taken with the others
	}
	return s.wait("the send's completion", func() bool { return s.txDone == s.txPosted })
}

// recv waits for the next message, checks its length and, with -c, its
// bytes, and posts the next receive (pp_rx).
func (s *session) recv(size int) error {
	if err := s.wait("a message", func() bool { return s.rxDone == s.rxPosted }); err != nil {
		return err
	}
	if s.rxLen != uint64(size) {
		return fmt.Errorf("received a message of %d bytes, want %d", s.rxLen, size)
	}
	if s.o.check {
		if i := checkBuf(s.mr.Mem()[s.rxOff:][:size], s.checkIter); i >= 0 {
			return fmt.Errorf("data check: message %d of %d bytes differs at byte %d", s.checkIter, size, i)
		}
		s.checkIter++
	}
	return s.postRecv()
}

// finalize is pp_finalize: send "fin" with FI_TRANSMIT_COMPLETE, wait for
// its completion (the peer's provider acknowledges it), then for the
// peer's "fin" in the receive posted last.
func (s *session) finalize() error {
	copy(s.mr.Mem()[s.finOff:], ppFinMsg)
	w := ring.WR{Op: s.x.sendOp, Flags: uint64(fi.TRANSMIT_COMPLETE), Context: ctxFin,
		Offset: s.finOff, Len: uint64(len(ppFinMsg)), Addr: s.dest, Tag: s.x.tag}
	if err := s.ep.Post(s.mr, w); err != nil {
		return fmt.Errorf("posting fin: %w", err)
	}
	s.finPosted++
	if err := s.wait("fin's completion", func() bool { return s.finDone == s.finPosted && s.txDone == s.txPosted }); err != nil {
		return err
	}
	if err := s.wait("the peer's fin", func() bool { return s.rxDone == s.rxPosted }); err != nil {
		return err
	}
	if got := s.mr.Mem()[s.rxOff:][:s.rxLen]; !bytes.Equal(got, ppFinMsg) {
		return fmt.Errorf("the peer's last message is %q, want %q", got, ppFinMsg)
	}
	return nil
}

// wait takes completions until done says so, failing after o.timeout
// without one.
func (s *session) wait(what string, done func() bool) error {
	for !done() {
		if err := s.cq.Wait(s.o.timeout); err != nil {
			if errors.Is(err, ring.ErrTimeout) {
				return fmt.Errorf("no completion for %v waiting for %s (sends %d posted %d done, receives %d posted %d done; ep err: %s)",
					s.o.timeout, what, s.txPosted, s.txDone, s.rxPosted, s.rxDone, s.ep.Err())
			}
			return err
		}
		for _, c := range s.cq.Poll(16) {
			if err := s.complete(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// complete counts one completion; an error completion ends the run.
func (s *session) complete(c ring.CQE) error {
	if c.Err != 0 {
		e := fi.Errno(-c.Err)
		return fmt.Errorf("completion op_context=%#x flags=%#x: error %d %s (%v), olen %d (ep err: %s)",
			c.Context, c.Flags, c.Err, e.Name(), e, c.OLen, s.ep.Err())
	}
	send, recv := c.Flags&uint64(fi.SEND) != 0, c.Flags&uint64(fi.RECV) != 0
	switch {
	case c.Context == ctxTx && send:
		s.txDone++
	case c.Context == ctxFin && send:
		s.finDone++
	case c.Context == ctxRx && recv:
		s.rxDone++
		s.rxLen = c.Len
		if c.Len > max(s.rxSize, ppMaxCtrlMsg) {
			return fmt.Errorf("receive completion with len %d, longer than its buffer", c.Len)
		}
	default:
		return fmt.Errorf("unexpected completion op_context=%#x flags=%#x len %d", c.Context, c.Flags, c.Len)
	}
	return nil
}

// fillBuf writes message iter of the -c pattern: the alphabet, starting
// iter*7 letters on (modulo its length, in C's unsigned arithmetic), round
// and round.
func fillBuf(b []byte, iter uint32) {
	k := iter * integSeed % uint32(len(integAlphabet))
	for i := range b {
		b[i] = integAlphabet[k]
		if k++; k == uint32(len(integAlphabet)) {
			k = 0
		}
	}
}

// checkBuf returns the index of the first byte of b that is not message
// iter's, or -1.
func checkBuf(b []byte, iter uint32) int {
	k := iter * integSeed % uint32(len(integAlphabet))
	for i := range b {
		if b[i] != integAlphabet[k] {
			return i
		}
		if k++; k == uint32(len(integAlphabet)) {
			k = 0
		}
	}
	return -1
}

func maxInt(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
