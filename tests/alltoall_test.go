package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// All-to-all over FI_EP_RDM: 32 endpoints on two fabricfs daemons, every
// endpoint sends one tagged message to every other one, all at once; half
// of the endpoints address their peers through an FI_AV_MAP, half through an
// FI_AV_TABLE.

const (
	a2aPerDaemon = 16
	a2aEPs       = 2 * a2aPerDaemon
	a2aSlot      = 16384 // one message's room in a memory region: the eager limit
	a2aTagMagic  = 0xa2a0 << 48
	a2aTimeout   = 30 * time.Second // for the whole exchange
)

// a2aSizes are the message sizes, chosen per pair (a2aSize): around the
// inject size (64), odd lengths, and the eager limit.
var a2aSizes = []int{0, 1, 63, 64, 65, 1000, 4095, 8192, 12345, 16383, 16384}

func a2aSize(from, to int) int { return a2aSizes[(from*7+to*3)%len(a2aSizes)] }

// a2aTag is the tag of the message from -> to: magic, sender, receiver, and
// in the low byte the index of its size, which receivers do not know in
// advance and so ignore (ignore 0xff) when they match.
func a2aTag(from, to int) uint64 {
	return a2aTagMagic | uint64(from)<<24 | uint64(to)<<8 | uint64((from*7+to*3)%len(a2aSizes))
}

// a2aByte is byte k of the message from -> to.
func a2aByte(from, to, k int) byte { return byte(k*131 + k>>8 + from*17 + to*5 + 1) }

// a2aNode is one endpoint of the exchange, with its AV, CQ and a memory
// region holding a receive slot per sender and a send slot per receiver.
type a2aNode struct {
	idx  int
	ep   *fabricfs.EP
	av   *fabricfs.AV
	cq   *fabricfs.CQ
	mr   *fabricfs.MR
	addr string
	// fiAddr[j] is endpoint j's fi_addr in this endpoint's AV.
	fiAddr [a2aEPs]uint64
}

func (n *a2aNode) recvOff(from int) uint64 { return uint64(from) * a2aSlot }
func (n *a2aNode) sendOff(to int) uint64   { return uint64(a2aEPs+to) * a2aSlot }

// a2aResult is what one endpoint saw: which senders' messages arrived
// intact, which of its sends completed, and every problem.
type a2aResult struct {
	got, sent [a2aEPs]bool
	problems  []string
}

// TestRDMAllToAll: 16 RDM endpoints on each of two daemons (tcp, domain
// lo), an AV per endpoint holding all 32 addresses. Each endpoint posts 31
// tagged receives, one per sender (tag: sender and receiver; ignore: the
// size byte), then all 32 post their 31 tagged sends at the same moment, in
// an order (step k: to i^k) that makes each pair's first contact
// simultaneous from both sides, across daemons and within one. Every
// message must arrive once, at the receive for its sender, with its full
// tag, its size, FI_SOURCE equal to the sender's fi_addr in the receiver's
// AV, and every byte; every send must complete without error.
func TestRDMAllToAll(t *testing.T) {
	daemons := []*daemon{mount(t), mount(t)}
	setup := time.Now()
	nodes := make([]*a2aNode, a2aEPs)
	for i := range nodes {
		tree := daemons[i%2].tree(t) // even on one daemon, odd on the other
		nodes[i] = newA2ANode(t, tree.Domain("tcp", "lo"), i)
	}
	addrs := make([]string, a2aEPs)
	seen := map[string]int{}
	for i, n := range nodes {
		if j, dup := seen[n.addr]; dup {
			t.Fatalf("endpoints %d and %d have the same address %s", j, i, n.addr)
		}
		seen[n.addr] = i
		addrs[i] = n.addr
	}
	for _, n := range nodes {
		n.insertAll(t, addrs)
	}
	t.Logf("setup (2 daemons, %d endpoints, %d AV entries): %v", a2aEPs, a2aEPs*a2aEPs, time.Since(setup))

	// Receives first, everywhere, so that no message is unexpected; then
	// the sends start together.
	for _, n := range nodes {
		for from := range a2aEPs {
			if from != n.idx {
				n.postRecv(t, from)
			}
		}
	}
	start := make(chan struct{})
	results := make([]a2aResult, a2aEPs)
	var wg sync.WaitGroup
	deadline := time.Now().Add(a2aTimeout)
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = n.exchange(deadline)
		}()
	}
	begin := time.Now()
	close(start)
	wg.Wait()
	t.Logf("exchange of %d messages: %v", a2aEPs*(a2aEPs-1), time.Since(begin))

	var missing, unsent, problems []string
	for to, r := range results {
		for from := range a2aEPs {
			if from == to {
				continue
			}
			if !r.got[from] {
				missing = append(missing, fmt.Sprintf("%d->%d", from, to))
			}
			if !r.sent[from] { // indexed by destination on the sender's side
				unsent = append(unsent, fmt.Sprintf("%d->%d", to, from))
			}
		}
		for _, p := range r.problems {
			problems = append(problems, fmt.Sprintf("ep %d (%s): %s", to, nodes[to].ep.Name(), p))
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d messages did not arrive intact within %v (sender->receiver, endpoints even on daemon 0, odd on daemon 1): %s",
			len(missing), a2aEPs*(a2aEPs-1), a2aTimeout, strings.Join(missing, " "))
	}
	if len(unsent) > 0 {
		t.Errorf("%d sends did not complete: %s", len(unsent), strings.Join(unsent, " "))
	}
	if t.Failed() {
		for i, n := range nodes {
			if e := n.ep.Err(); e != "" {
				t.Logf("ep %d err: %s", i, e)
			}
		}
	}
}

func newA2ANode(t *testing.T, dom *fabricfs.Domain, idx int) *a2aNode {
	t.Helper()
	n := &a2aNode{idx: idx}
	var err error
	if n.av, err = dom.NewAV(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.av.Close() })
	// Half the endpoints address their peers through an FI_AV_MAP, half
	// through an FI_AV_TABLE.
	if idx%4 >= 2 {
		if err := n.av.SetAttr("type", "FI_AV_MAP"); err != nil {
			t.Fatal(err)
		}
	}
	if n.cq, err = dom.NewCQ(256); err != nil { // 62 completions at most
		t.Fatal(err)
	}
	t.Cleanup(func() { n.cq.Close() })
	if n.ep, err = dom.NewRDM(n.av, n.cq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.ep.Close() }) // cleanups run last first: ep before cq and av
	if n.mr, err = dom.NewMR(2*a2aEPs*a2aSlot, "FI_SEND,FI_RECV"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.mr.Close() })
	if n.addr, err = n.ep.Local(); err != nil {
		t.Fatal(err)
	}
	for to := range a2aEPs {
		buf := n.mr.Mem()[n.sendOff(to):][:a2aSize(idx, to)]
		for k := range buf {
			buf[k] = a2aByte(idx, to, k)
		}
	}
	return n
}

// insertAll inserts every address, in order, with one insert command, and
// reads each one's fi_addr back from av/N/addrs.
func (n *a2aNode) insertAll(t *testing.T, addrs []string) {
	t.Helper()
	if err := n.av.Ctl("insert " + strings.Join(addrs, " ")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(n.av.Dir, "addrs"))
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("%s/addrs: bad line %q", n.av.Dir, l)
		}
		a, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			t.Fatalf("%s/addrs: bad line %q", n.av.Dir, l)
		}
		byAddr[f[1]] = a
	}
	if len(byAddr) != len(addrs) {
		t.Fatalf("%s/addrs has %d entries, want %d:\n%s", n.av.Dir, len(byAddr), len(addrs), b)
	}
	for j, a := range addrs {
		fa, ok := byAddr[a]
		if !ok {
			t.Fatalf("%s/addrs lacks %s:\n%s", n.av.Dir, a, b)
		}
		n.fiAddr[j] = fa
	}
}

// postRecv posts the tagged receive for from's message: its slot, its tag
// with the size byte ignored, from any source (the tag says who).
func (n *a2aNode) postRecv(t *testing.T, from int) {
	t.Helper()
	w := ring.WR{Op: ring.OpTRecv, Context: uint64(from), Offset: n.recvOff(from), Len: a2aSlot,
		Tag: a2aTag(from, n.idx) &^ 0xff, Ignore: 0xff, Addr: uint64(fi.ADDR_UNSPEC)}
	if err := n.ep.Post(n.mr, w); err != nil {
		t.Fatalf("ep %d: posting the receive for %d: %v", n.idx, from, err)
	}
}

// exchange posts the endpoint's 31 sends (step k goes to idx^k, so that
// the peer sends back at the same step) and takes completions until all
// sends and receives are done or the deadline passes. It runs on its own
// goroutine, the only user of the endpoint's rings.
func (n *a2aNode) exchange(deadline time.Time) (r a2aResult) {
	problem := func(format string, args ...any) { r.problems = append(r.problems, fmt.Sprintf(format, args...)) }
	nextSend, pending := 1, 2*(a2aEPs-1)
	for pending > 0 && time.Now().Before(deadline) {
		for ; nextSend < a2aEPs; nextSend++ {
			to := n.idx ^ nextSend
			w := ring.WR{Op: ring.OpTSend, Context: 1<<32 | uint64(to), Offset: n.sendOff(to),
				Len: uint64(a2aSize(n.idx, to)), Addr: n.fiAddr[to], Tag: a2aTag(n.idx, to)}
			if err := n.ep.Post(n.mr, w); err != nil {
				if !errors.Is(err, syscall.EAGAIN) {
					problem("posting the send to %d: %v", to, err)
					return r
				}
				break // the tx ring is full: take completions, then go on
			}
		}
		cs := n.cq.Poll(64)
		if len(cs) == 0 {
			if err := n.cq.Wait(20 * time.Millisecond); err != nil && !errors.Is(err, ring.ErrTimeout) {
				problem("waiting for completions: %v", err)
				return r
			}
			continue
		}
		for _, c := range cs {
			pending--
			if c.Flags&uint64(fi.SEND) != 0 {
				n.sendDone(&r, c, problem)
			} else {
				n.recvDone(&r, c, problem)
			}
		}
	}
	return r
}

func (n *a2aNode) sendDone(r *a2aResult, c ring.CQE, problem func(string, ...any)) {
	to := int(c.Context &^ (1 << 32))
	switch {
	case c.Context>>32 != 1 || to >= a2aEPs || to == n.idx:
		problem("send completion with a foreign context: %+v", c)
	case c.Err != 0:
		problem("send to %d failed: err %d (prov_errno %d)", to, c.Err, c.ProvErrno)
	case r.sent[to]:
		problem("second send completion for %d", to)
	default:
		r.sent[to] = true
	}
}

func (n *a2aNode) recvDone(r *a2aResult, c ring.CQE, problem func(string, ...any)) {
	from := int(c.Context)
	if c.Context >= a2aEPs || from == n.idx {
		problem("receive completion with a foreign context: %+v", c)
		return
	}
	size := a2aSize(from, n.idx)
	want := uint64(fi.RECV | fi.TAGGED)
	switch {
	case c.Err != 0:
		problem("receive for %d failed: err %d (prov_errno %d, olen %d)", from, c.Err, c.ProvErrno, c.OLen)
	case r.got[from]:
		problem("second message for the receive of %d", from)
	case c.Flags != want:
		problem("message from %d: flags %#x, want FI_RECV|FI_TAGGED (%#x)", from, c.Flags, want)
	case c.Tag != a2aTag(from, n.idx):
		problem("message from %d: tag %#x, want %#x", from, c.Tag, a2aTag(from, n.idx))
	case c.SrcAddr != n.fiAddr[from]:
		problem("message from %d: FI_SOURCE fi_addr %#x, want %d (its entry in this AV)", from, c.SrcAddr, n.fiAddr[from])
	case c.Len != uint64(size) || c.Buf != n.recvOff(from):
		problem("message from %d: %d bytes at %d, want %d at %d", from, c.Len, c.Buf, size, n.recvOff(from))
	default:
		buf := n.mr.Mem()[n.recvOff(from):][:size]
		for k, b := range buf {
			if b != a2aByte(from, n.idx, k) {
				problem("message from %d: byte %d of %d is %#x, want %#x", from, k, size, b, a2aByte(from, n.idx, k))
				return
			}
		}
		r.got[from] = true
	}
}
