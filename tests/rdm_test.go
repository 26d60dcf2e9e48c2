package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// FI_EP_RDM through the mounted tree: tcp;ofi_rxm endpoints made by
// writing attr/type, addressed through AVs, driven from sh and through the
// rings.

// TestRDMShellSession runs testdata/rdm_session.sh.
func TestRDMShellSession(t *testing.T) {
	d := mount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "testdata/rdm_session.sh")
	cmd.Env = append(os.Environ(), "FABRIC="+d.mnt)
	out, err := cmd.CombinedOutput()
	t.Logf("rdm_session.sh:\n%s", out)
	if err != nil {
		t.Fatalf("rdm_session.sh: %v", err)
	}
}

// rdmNode is one RDM endpoint made through the tree, with its own AV, CQ
// and memory region.
type rdmNode struct {
	ep   *fabricfs.EP
	av   *fabricfs.AV
	cq   *fabricfs.CQ
	mr   *fabricfs.MR
	addr string
}

func newRDMNode(t *testing.T, dom *fabricfs.Domain) *rdmNode {
	t.Helper()
	return newRDMNodeWith(t, dom)
}

// newRDMNodeWith is newRDMNode with the endpoint's attributes attrs (name,
// value, ...) set before enable.
func newRDMNodeWith(t *testing.T, dom *fabricfs.Domain, attrs ...string) *rdmNode {
	t.Helper()
	return newRDMNodeEP(t, dom, func(av *fabricfs.AV, cq *fabricfs.CQ) (*fabricfs.EP, error) {
		return dom.NewRDM(av, cq, attrs...)
	})
}

// newRDMNodeEP is newRDMNode with the endpoint made, bound to the node's
// AV and CQ, and enabled by mk.
func newRDMNodeEP(t *testing.T, dom *fabricfs.Domain, mk func(*fabricfs.AV, *fabricfs.CQ) (*fabricfs.EP, error)) *rdmNode {
	t.Helper()
	n := &rdmNode{}
	var err error
	if n.av, err = dom.NewAV(); err != nil {
		t.Fatal(err)
	}
	if n.cq, err = dom.NewCQ(4096); err != nil {
		t.Fatal(err)
	}
	if n.ep, err = mk(n.av, n.cq); err != nil {
		t.Fatal(err)
	}
	if n.mr, err = dom.NewMR(1<<20, "FI_SEND,FI_RECV"); err != nil {
		t.Fatal(err)
	}
	if n.addr, err = n.ep.Local(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range []interface{ Close() error }{n.mr, n.ep, n.cq, n.av} {
			c.Close()
		}
	})
	return n
}

// insert puts o's address into n's AV.
func (n *rdmNode) insert(t *testing.T, o *rdmNode) uint64 {
	t.Helper()
	a, err := n.av.Insert(o.addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (n *rdmNode) post(t *testing.T, w ring.WR) {
	t.Helper()
	for {
		err := n.ep.Post(n.mr, w)
		if err == nil {
			return
		}
		if !errors.Is(err, syscall.EAGAIN) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}

// taken waits until the daemon has taken every request from n's rx ring,
// so that messages sent from now on find the receives posted.
func (n *rdmNode) taken(t *testing.T) {
	t.Helper()
	rx, err := n.ep.Rx()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); rx.Len() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the daemon did not take the receives from the rx ring", n.ep.Name())
		}
	}
}

// next takes one completion.
func (n *rdmNode) next(t *testing.T) ring.CQE {
	t.Helper()
	for {
		if c := n.cq.Poll(1); len(c) == 1 {
			return c[0]
		}
		if err := n.cq.Wait(10 * time.Second); err != nil {
			t.Fatalf("%s: no completion: %v (ep err: %s)", n.ep.Name(), err, n.ep.Err())
		}
	}
}

// recvDone takes completions until a receive's, skipping successful sends.
func (n *rdmNode) recvDone(t *testing.T) ring.CQE {
	t.Helper()
	for {
		c := n.next(t)
		if c.Flags&uint64(fi.RECV) != 0 || c.Err != 0 {
			return c
		}
	}
}

const anyAddr = uint64(fi.ADDR_UNSPEC)

// TestRDMRings moves untagged and tagged messages between RDM endpoints
// through the rings: sends go to AV fi_addrs, receives report their source
// through the receiver's AV (FI_SOURCE), a directed receive (its addr)
// takes only its source's messages, a sender the receiver does not know is
// FI_ADDR_NOTAVAIL, and a message above the eager limit goes by
// rendezvous.
func TestRDMRings(t *testing.T) {
	d := mount(t)
	tree := d.tree(t)
	dom := tree.Domain("tcp", "lo")
	a, b, c := newRDMNode(t, dom), newRDMNode(t, dom), newRDMNode(t, dom)
	bInA := a.insert(t, b)
	aInB, cInB := b.insert(t, a), b.insert(t, c)
	bInC := c.insert(t, b)

	// a -> b, untagged then tagged, with remote CQ data on the tagged one.
	copy(a.mr.Mem(), "untagged message")
	copy(a.mr.Mem()[100:], "tagged message")
	b.post(t, ring.WR{Op: ring.OpRecv, Context: 1, Offset: 0, Len: 64, Addr: anyAddr})
	b.post(t, ring.WR{Op: ring.OpTRecv, Context: 2, Offset: 64, Len: 64, Tag: 0x1200, Ignore: 0xff, Addr: anyAddr})
	a.post(t, ring.WR{Op: ring.OpSend, Context: 3, Offset: 0, Len: 16, Addr: bInA})
	a.post(t, ring.WR{Op: ring.OpTSend, Flags: uint64(fi.REMOTE_CQ_DATA), Context: 4, Offset: 100, Len: 14, Addr: bInA, Tag: 0x1234, Data: 77})
	for _, want := range []struct {
		ctx   uint64
		flags fi.Caps
		body  string
		tag   uint64
	}{{1, fi.RECV | fi.MSG, "untagged message", 0}, {2, fi.RECV | fi.TAGGED, "tagged message", 0x1234}} {
		e := b.recvDone(t)
		got := string(b.mr.Mem()[e.Buf:][:e.Len])
		if e.Err != 0 || e.Context != want.ctx || e.Flags&^uint64(fi.REMOTE_CQ_DATA) != uint64(want.flags) || got != want.body || e.Tag != want.tag || e.SrcAddr != aInB {
			t.Fatalf("receive %d: %+v %q", want.ctx, e, got)
		}
		if want.ctx == 2 && (e.Data != 77 || e.Flags&uint64(fi.REMOTE_CQ_DATA) == 0) {
			t.Fatalf("remote CQ data: %+v", e)
		}
	}
	for range 2 {
		if e := a.next(t); e.Err != 0 || e.Flags&uint64(fi.SEND) == 0 {
			t.Fatalf("send completion %+v", e)
		}
	}

	// A receive directed to c (FI_DIRECTED_RECV) waits for c's message
	// although a's arrives first; then a receive from anyone takes a's.
	b.post(t, ring.WR{Op: ring.OpRecv, Context: 5, Offset: 0, Len: 64, Addr: cInB})
	copy(a.mr.Mem()[200:], "from a")
	copy(c.mr.Mem()[200:], "from c")
	a.post(t, ring.WR{Op: ring.OpSend, Context: 6, Offset: 200, Len: 6, Addr: bInA})
	a.next(t)
	time.Sleep(20 * time.Millisecond)
	c.post(t, ring.WR{Op: ring.OpSend, Context: 7, Offset: 200, Len: 6, Addr: bInC})
	if e := b.recvDone(t); e.Context != 5 || string(b.mr.Mem()[:e.Len]) != "from c" || e.SrcAddr != cInB {
		t.Fatalf("directed receive: %+v %q", e, b.mr.Mem()[:e.Len])
	}
	b.post(t, ring.WR{Op: ring.OpRecv, Context: 8, Offset: 0, Len: 64, Addr: anyAddr})
	if e := b.recvDone(t); e.Context != 8 || string(b.mr.Mem()[:e.Len]) != "from a" || e.SrcAddr != aInB {
		t.Fatalf("receive from anyone: %+v %q", e, b.mr.Mem()[:e.Len])
	}

	// c is not in a's AV: its message's source is FI_ADDR_NOTAVAIL.
	aInC := c.insert(t, a)
	a.post(t, ring.WR{Op: ring.OpRecv, Context: 9, Offset: 0, Len: 64, Addr: anyAddr})
	c.post(t, ring.WR{Op: ring.OpSend, Context: 10, Offset: 200, Len: 6, Addr: aInC})
	if e := a.recvDone(t); e.Context != 9 || e.SrcAddr != uint64(fi.ADDR_NOTAVAIL) {
		t.Fatalf("receive from a stranger: %+v", e)
	}

	// Above the eager limit: the rendezvous.
	for k := range 16385 {
		a.mr.Mem()[k] = byte(k * 7)
	}
	b.post(t, ring.WR{Op: ring.OpRecv, Context: 12, Offset: 0, Len: 20000, Addr: anyAddr})
	a.post(t, ring.WR{Op: ring.OpSend, Context: 11, Offset: 0, Len: 16385, Addr: bInA})
	if e := a.next(t); e.Context != 11 || e.Err != 0 || e.Len != 16385 {
		t.Fatalf("send of 16385 bytes: %+v", e)
	}
	if e := b.recvDone(t); e.Context != 12 || e.Err != 0 || e.Len != 16385 || !bytes.Equal(b.mr.Mem()[:16385], a.mr.Mem()[:16385]) {
		t.Fatalf("receive of 16385 bytes: %+v", e)
	}
}

// TestRDMRingRendezvous moves messages above the eager limit through the
// rings: one of 8 MiB, a truncated one, and a stream of mixed sizes, eager
// and rendezvous, with several in flight; each arrives intact with its tag.
// Rendezvous receives complete when read, so completions come out of
// order: every message has its own tag, buffer slot and context.
func TestRDMRingRendezvous(t *testing.T) {
	d := mount(t)
	tree := d.tree(t)
	dom := tree.Domain("tcp", "lo")
	a, b := newRDMNode(t, dom), newRDMNode(t, dom)
	const big = 16 << 20
	for _, n := range []*rdmNode{a, b} {
		var err error
		if n.mr, err = dom.NewMR(big, "FI_SEND,FI_RECV"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.mr.Close() })
	}
	dst := a.insert(t, b)

	// 8 MiB, tagged.
	const huge = 8 << 20
	fillPattern(a.mr.Mem()[:huge], 1)
	b.post(t, ring.WR{Op: ring.OpTRecv, Context: 1, Offset: huge, Len: huge, Tag: 5, Addr: anyAddr})
	a.post(t, ring.WR{Op: ring.OpTSend, Context: 2, Offset: 0, Len: huge, Tag: 5, Addr: dst})
	if e := b.recvDone(t); e.Context != 1 || e.Err != 0 || e.Len != huge || e.Tag != 5 || !bytes.Equal(b.mr.Mem()[huge:][:huge], a.mr.Mem()[:huge]) {
		t.Fatalf("receive of 8 MiB: %+v", e)
	}
	if e := a.next(t); e.Context != 2 || e.Err != 0 || e.Len != huge {
		t.Fatalf("send of 8 MiB: %+v", e)
	}

	// Truncated: a receive of 20000 bytes for a message of 100000.
	b.post(t, ring.WR{Op: ring.OpRecv, Context: 3, Offset: 0, Len: 20000, Addr: anyAddr})
	a.post(t, ring.WR{Op: ring.OpSend, Context: 4, Offset: 0, Len: 100000, Addr: dst})
	if e := b.recvDone(t); e.Context != 3 || e.Err != -int32(fi.ETRUNC) || e.Len != 20000 || e.OLen != 80000 ||
		!bytes.Equal(b.mr.Mem()[:20000], a.mr.Mem()[:20000]) {
		t.Fatalf("truncated receive: %+v", e)
	}
	if e := a.next(t); e.Context != 4 || e.Err != 0 {
		t.Fatalf("send of a truncated message: %+v", e)
	}

	// A stream: slots of 1 MiB, window of 8 each side, completions in any
	// order (rendezvous receives complete when read).
	size := func(i int) int { return []int{100, 16385, 100000, 1 << 20, 5000, 300000, 0}[i%7] }
	ringStream(t, a, b, dst, 200, 8, 1<<20, size, false)
}

// TestRDMRingStream streams 2000 tagged messages of mixed sizes up to the
// eager limit from one RDM endpoint to another through the rings and
// checks each arrives once, in order, with its tag and content.
func TestRDMRingStream(t *testing.T) {
	d := mount(t)
	tree := d.tree(t)
	dom := tree.Domain("tcp", "lo")
	a, b := newRDMNode(t, dom), newRDMNode(t, dom)
	dst := a.insert(t, b)
	size := func(i int) int { return []int{0, 1, 64, 1000, 4096, 16384, 9000}[i%7] }
	ringStream(t, a, b, dst, 2000, 32, 16384, size, true)
}

// TestRDMRingMultiRecv posts receives with FI_MULTI_RECV through the rx
// ring, with min_multi_recv set by the setopt verb: each message's
// completion names its place in the buffer, and the one that releases the
// buffer has FI_MULTI_RECV; rendezvous messages land in it too.
func TestRDMRingMultiRecv(t *testing.T) {
	d := mount(t)
	tree := d.tree(t)
	dom := tree.Domain("tcp", "lo")
	a, b := newRDMNode(t, dom), newRDMNode(t, dom)
	if err := b.ep.Ctl("setopt FI_OPT_MIN_MULTI_RECV 1000"); err != nil {
		t.Fatal(err)
	}
	dst := a.insert(t, b)
	mem := a.mr.Mem()
	for k := range mem {
		mem[k] = byte(k*7 + k>>9)
	}
	type want struct {
		buf, n  uint64
		release bool
	}
	check := func(ctx uint64, base uint64, sizes []uint64, wants []want) {
		t.Helper()
		off := uint64(0)
		for _, n := range sizes {
			a.post(t, ring.WR{Op: ring.OpSend, Context: 100, Offset: off, Len: n, Addr: dst})
			off += n
		}
		got := map[uint64]ring.CQE{}
		for i := range wants {
			e := b.recvDone(t)
			if e.Err != 0 || e.Context != ctx {
				t.Fatalf("completion %d: %+v", i, e)
			}
			if released := e.Flags&uint64(fi.MULTI_RECV) != 0; released && i != len(wants)-1 {
				t.Fatalf("buffer released by completion %d of %d: %+v", i, len(wants), e)
			}
			got[e.Buf] = e
		}
		for _, w := range wants {
			e, ok := got[w.buf]
			if !ok || e.Len != w.n || (e.Flags&uint64(fi.MULTI_RECV) != 0) != w.release {
				t.Fatalf("at %d: %+v, want %+v", w.buf, e, w)
			}
			src := w.buf - base // the sender's offset: messages are packed as sent
			if !bytes.Equal(b.mr.Mem()[w.buf:][:w.n], mem[src:][:w.n]) {
				t.Fatalf("wrong bytes at %d", w.buf)
			}
		}
		for range sizes {
			if e := a.next(t); e.Err != 0 {
				t.Fatalf("send: %+v", e)
			}
		}
	}
	// Eager: 3 x 3000 leave 1000 each time; 100 then leaves 900: released.
	// Posted before the messages come (taken): messages that wait for a
	// multi-receive buffer fill it otherwise (a separate release).
	b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.MULTI_RECV), Context: 7, Offset: 0, Len: 10000, Addr: anyAddr})
	b.taken(t)
	check(7, 0, []uint64{3000, 3000, 3000, 100}, []want{{0, 3000, false}, {3000, 3000, false}, {6000, 3000, false}, {9000, 100, true}})
	// Rendezvous: 100000 leaves 20000; 19500 leaves 500: released.
	b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.MULTI_RECV), Context: 8, Offset: 200000, Len: 120000, Addr: anyAddr})
	b.taken(t)
	check(8, 200000, []uint64{100000, 19500}, []want{{200000, 100000, false}, {300000, 19500, true}})
}

// ringStream sends n tagged messages (tag i, fillPattern(i), size(i) bytes)
// from a to b through the rings, with window receives of slot bytes
// posted and window sends outstanding, recycling the region's slots as
// operations complete, and checks every completion and every byte. With
// inOrder the receives match any tag and must complete in sending order;
// otherwise each receive takes its own tag and completions may come in any
// order.
func ringStream(t *testing.T, a, b *rdmNode, dst uint64, n, window, slot int, size func(int) int, inOrder bool) {
	t.Helper()
	var sendSlots, recvSlots []int
	for k := range window {
		sendSlots, recvSlots = append(sendSlots, k), append(recvSlots, window+k)
	}
	recvSlotOf := map[uint64]int{} // by context
	sendSlotOf := map[uint64]int{}
	ignore := uint64(0)
	if inOrder {
		ignore = ^uint64(0)
	}
	var sent, posted, got int
	deadline := time.Now().Add(2 * time.Minute)
	for got < n {
		if time.Now().After(deadline) {
			t.Fatalf("stuck: sent %d, posted %d, received %d", sent, posted, got)
		}
		for ; posted < n && len(recvSlots) > 0; posted++ {
			k := recvSlots[0]
			recvSlots = recvSlots[1:]
			recvSlotOf[uint64(posted)] = k
			b.post(t, ring.WR{Op: ring.OpTRecv, Context: uint64(posted), Offset: uint64(k * slot), Len: uint64(slot),
				Tag: uint64(posted), Ignore: ignore, Addr: anyAddr})
		}
		for ; sent < n && len(sendSlots) > 0; sent++ {
			k := sendSlots[0]
			sendSlots = sendSlots[1:]
			sendSlotOf[uint64(sent)] = k
			fillPattern(a.mr.Mem()[k*slot:][:size(sent)], sent)
			a.post(t, ring.WR{Op: ring.OpTSend, Context: uint64(sent), Offset: uint64(k * slot), Len: uint64(size(sent)), Addr: dst, Tag: uint64(sent)})
		}
		for _, e := range a.cq.Poll(64) {
			if e.Err != 0 || e.Len != uint64(size(int(e.Context))) {
				t.Fatalf("send %d: %+v", e.Context, e)
			}
			sendSlots = append(sendSlots, sendSlotOf[e.Context])
		}
		recvd := b.cq.Poll(64)
		if len(recvd) == 0 {
			b.cq.Wait(10 * time.Millisecond)
		}
		for _, e := range recvd {
			i := int(e.Tag)
			want := make([]byte, size(i))
			fillPattern(want, i)
			k := recvSlotOf[e.Context]
			if e.Err != 0 || e.Context != uint64(i) || (inOrder && i != got) || e.Buf != uint64(k*slot) ||
				!bytes.Equal(b.mr.Mem()[e.Buf:][:e.Len], want) {
				t.Fatalf("message %d (arrival %d): %+v", i, got, e)
			}
			recvSlots = append(recvSlots, k)
			got++
		}
	}
}

// fillPattern fills buf with message i's bytes.
func fillPattern(buf []byte, i int) {
	for k := range buf {
		buf[k] = byte(i + k*13 + k>>10)
	}
}
