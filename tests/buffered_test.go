package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestBufferedRecvRings: FI_BUFFERED_RECV through the tree. fi_getinfo(3):
// "Applications that can handle message processing from network allocated
// data buffers can set this mode bit to avoid copies." The FI_EP_RDM entry
// offers the mode; getinfo keeps it for hints whose mode has it and leaves
// it out otherwise, and an endpoint has it only when its info asks.
// fi_msg(3): "When a provider receives a message, it will write an entry to
// the completion queue associated with the receiving endpoint. ... `len'
// will be set to the total size of the message." "To claim a message, an
// application must post a receive operation with the FI_CLAIM flag set.
// The struct fi_recv_context returned as part of the notification must be
// provided as the receive operation's context." In the tree the report's
// op_context is the claim key, which a RECV with FI_CLAIM (or FI_DISCARD)
// gives in rma_key; its own context comes back with FI_CLAIM. "The CQ
// entry's `buf' will point to a provider managed buffer where the start of
// the received message is located": an offset in ep/N/buffered, which the
// application maps, and the entry's desc is the endpoint's attr/desc (the
// endpoint a report on a shared CQ came from). "If the sent message is
// larger than the buffered amount, the CQ entry `flags' will have the
// FI_MORE bit set": a rendezvous message (above 16384 bytes) shows none.
func TestBufferedRecvRings(t *testing.T) {
	d := mount(t)
	for _, c := range []struct {
		mode string
		want bool
	}{{"[ FI_BUFFERED_RECV ]", true}, {"[ FI_CONTEXT ]", false}} {
		out, err := ask(t, d, "-p tcp -d lo -t FI_EP_RDM\nfi_info:\n    mode: "+c.mode+"\n")
		if err != nil || len(entries(out)) == 0 {
			t.Fatalf("hints with mode %s: %v", c.mode, err)
		}
		for _, e := range entries(out) {
			if got := strings.Contains(e, "FI_BUFFERED_RECV"); got != c.want {
				t.Errorf("hints with mode %s: FI_BUFFERED_RECV in the answer %v, want %v\n%s", c.mode, got, c.want, e)
			}
		}
	}

	// fi_getinfo(3): "If a NULL hints structure is provided, then the
	// provider's supported set of modes will be returned". rxm's entries
	// (tcp's and verbs's FI_EP_RDM) have the mode; shm's have none.
	for _, e := range entries(d.read(t, "getinfo")) {
		if strings.Contains(e, "        protocol: FI_PROTO_RXM\n") && !strings.Contains(e, "    mode: [ FI_BUFFERED_RECV ]\n") {
			t.Errorf("an FI_EP_RDM entry of getinfo without hints lacks FI_BUFFERED_RECV:\n%s", e)
		}
	}

	tree := d.tree(t)
	dom := tree.Domain("tcp", "lo")
	a := newRDMNode(t, dom)
	if mode, err := a.ep.Attr("mode"); err != nil || strings.Contains(mode, "FI_BUFFERED_RECV") {
		t.Errorf("an endpoint made without asking: attr/mode %q, %v", mode, err)
	}
	b := newBufferedNode(t, dom)
	dst := a.insert(t, b)
	mem := a.mr.Mem()
	for k := range mem {
		mem[k] = byte(k*13 + k>>8)
	}
	sizes := []uint64{500, 0, 70000, 100}
	off := uint64(0)
	var reports []ring.CQE
	for _, n := range sizes {
		a.post(t, ring.WR{Op: ring.OpSend, Context: 100, Offset: off, Len: n, Addr: dst})
		e := b.recvDone(t)
		want := uint64(fi.RECV | fi.MSG)
		if n > 16384 {
			want |= uint64(fi.MORE)
		}
		if e.Err != 0 || e.Flags != want || e.Len != n || e.Context == 0 {
			t.Fatalf("report of a %d-byte message: %+v, want flags %#x and a claim key", n, e, want)
		}
		reports = append(reports, e)
		off += n
	}
	shown, err := os.ReadFile(filepath.Join(b.ep.Dir, "buffered"))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := b.ep.Attr("desc")
	if err != nil {
		t.Fatal(err)
	}
	off = 0
	for i, n := range sizes {
		e := reports[i]
		if got := fmt.Sprintf("%#x", e.Desc); got != strings.TrimSpace(desc) {
			t.Errorf("report %d: desc %s, want the endpoint's attr/desc %s", i, got, desc)
		}
		if n <= 16384 && (e.Buf+n > uint64(len(shown)) || !bytes.Equal(shown[e.Buf:][:n], mem[off:][:n])) {
			t.Errorf("report %d: the %d bytes at buf %#x of ep/N/buffered are not the message's", i, n, e.Buf)
		}
		off += n
	}
	// Claim the first three into b's region, discard the last.
	off = 0
	for i, n := range sizes[:3] {
		b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.CLAIM), Context: uint64(200 + i), Offset: 1000 + off,
			Len: n + 8, Addr: anyAddr, RMAKey: reports[i].Context})
		e := b.recvDone(t)
		if e.Err != 0 || e.Context != uint64(200+i) || e.Len != n || e.Flags != uint64(fi.RECV|fi.MSG)|uint64(fi.CLAIM) {
			t.Fatalf("claim %d: %+v", i, e)
		}
		if !bytes.Equal(b.mr.Mem()[1000+off:][:n], mem[off:][:n]) {
			t.Fatalf("claim %d: the bytes differ from the ones sent", i)
		}
		off += n
	}
	b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.DISCARD), Context: 300, Addr: anyAddr, RMAKey: reports[3].Context})
	if e := b.recvDone(t); e.Err != 0 || e.Context != 300 || e.Len != 0 {
		t.Fatalf("discard: %+v", e)
	}
	// A key claimed already holds nothing.
	b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.CLAIM), Context: 301, Offset: 0, Len: 100, Addr: anyAddr, RMAKey: reports[0].Context})
	if e := b.recvDone(t); e.Context != 301 || e.Err != -int32(fi.ENOMSG) {
		t.Fatalf("a second claim: %+v, want -FI_ENOMSG", e)
	}
	for range sizes {
		if e := a.next(t); e.Err != 0 {
			t.Fatalf("send: %+v", e)
		}
	}
}

// newBufferedNode is newRDMNode with FI_BUFFERED_RECV asked in the
// endpoint's info block before enable, and the ctl commands setup run
// before enable.
func newBufferedNode(t *testing.T, dom *fabricfs.Domain, setup ...string) *rdmNode {
	t.Helper()
	return newRDMNodeEP(t, dom, func(av *fabricfs.AV, cq *fabricfs.CQ) (*fabricfs.EP, error) {
		e, err := dom.NewEP()
		if err != nil {
			return nil, err
		}
		// The capabilities are named: with none, getinfo gives every one
		// supported, FI_SOURCE_ERR among them, and this endpoint's sender is
		// not in its AV.
		block := "fi_info:\n    caps: [ FI_MSG, FI_RMA ]\n    mode: [ FI_BUFFERED_RECV ]\n    fi_ep_attr:\n        type: FI_EP_RDM\n"
		err = os.WriteFile(filepath.Join(e.Dir, "info"), []byte(block), 0)
		if mode, merr := e.Attr("mode"); err == nil && (merr != nil || !strings.Contains(mode, "FI_BUFFERED_RECV")) {
			err = fmt.Errorf("attr/mode %q, %v after the info block", mode, merr)
		}
		for _, cmd := range append(setup, "bind av "+av.ID(), "bind cq "+cq.ID()+" send,recv", "enable") {
			if err == nil {
				err = e.Ctl(cmd)
			}
		}
		if err != nil {
			err = fmt.Errorf("%v (%s)", err, e.Err())
			e.Close()
			return nil, err
		}
		return e, nil
	})
}

// TestBufferedRecvShell: buffered receives from the shell. The reports
// are lines of the receive CQ's events file, op_context the claim key;
// the ctl verb claim takes a message into a memory region (mr data then
// holds it) and returns once the claim completes, and discard drops one.
// fi_msg(3): "After being notified that a buffered receive has arrived,
// applications must either claim or discard the message."
func TestBufferedRecvShell(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	a, b := newRDMNode(t, dom), newBufferedNode(t, dom)
	dst := a.insert(t, b)
	copy(a.mr.Mem(), "hello, buffered world")
	a.post(t, ring.WR{Op: ring.OpSend, Context: 1, Offset: 0, Len: 21, Addr: dst})
	a.post(t, ring.WR{Op: ring.OpSend, Context: 2, Offset: 7, Len: 8, Addr: dst})
	events := filepath.Join(b.cq.Dir, "events")
	var keys []string
	for deadline := time.Now().Add(10 * time.Second); len(keys) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 reports after 10s", len(keys))
		}
		out, err := readNonblock(events)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l == "" {
				continue
			}
			m := regexp.MustCompile(`op_context=(0x[0-9a-f]+) flags=(\S+) len=(\d+)`).FindStringSubmatch(l)
			if m == nil || m[2] != "FI_RECV|FI_MSG" {
				t.Fatalf("report %q, want op_context, flags FI_RECV|FI_MSG (all of the message shown) and len", l)
			}
			keys = append(keys, m[1])
		}
	}
	if err := b.ep.Ctl("claim " + keys[0] + " " + b.mr.ID() + " 100 64 0x55"); err != nil {
		t.Fatalf("claim: %v (%s)", err, b.ep.Err())
	}
	if got := string(b.mr.Mem()[100:121]); got != "hello, buffered world" {
		t.Errorf("after claim, mr data holds %q", got)
	}
	if err := b.ep.Ctl("discard " + keys[1]); err != nil {
		t.Fatalf("discard: %v (%s)", err, b.ep.Err())
	}
	if err := b.ep.Ctl("claim " + keys[0] + " " + b.mr.ID() + " 100 64"); !errors.Is(err, syscall.ENOMSG) {
		t.Errorf("a second claim of %s: %v, want ENOMSG", keys[0], err)
	}
	out, err := readNonblock(events)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "op_context=0x55 flags=FI_RECV|FI_MSG|FI_CLAIM len=21") {
		t.Errorf("the claim's completion is not among the events:\n%s", out)
	}
	// An endpoint without the mode has neither verb.
	if err := a.ep.Ctl("discard " + keys[1]); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("discard on an endpoint without FI_BUFFERED_RECV: %v, want EOPNOTSUPP", err)
	}
}

// TestBufferedRecvLimits: FI_OPT_BUFFERED_LIMIT and FI_OPT_BUFFERED_MIN as
// fi_msg(3) and fi_endpoint(3) give them. "The maximum sized message that
// a provider can buffer is limited by an FI_OPT_BUFFERED_LIMIT ... If the
// sent message is larger than the buffered amount, the CQ entry `flags'
// will have the FI_MORE bit set. When the FI_MORE bit is set, `buf' will
// reference at least FI_OPT_BUFFERED_MIN bytes of data"; fi_endpoint(3),
// FI_OPT_BUFFERED_MIN: "Defines the minimum size of a buffered message
// that will be reported." With the limit 64 and the minimum 32, a
// 500-byte message shows its first 64 bytes with FI_MORE, a 40-byte one
// all of its bytes without, a 20000-byte one (rendezvous) its first 32,
// and a claim still receives all of a message. The
// endpoint shows core.BufferedSlots messages at once: the next report
// comes once a claim or a discard takes one ("Buffered receives must be
// claimed or discarded in a timely manner. Failure to do so may result in
// ... communication stalls"), in the order the messages came.
func TestBufferedRecvLimits(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	a := newRDMNode(t, dom)
	b := newBufferedNode(t, dom, "setopt buffered_limit 64", "setopt buffered_min 32")
	dst := a.insert(t, b)
	mem := a.mr.Mem()
	for k := range mem[:4096] {
		mem[k] = byte(k*7 + 3)
	}
	shownAt := func(e ring.CQE, n uint64) []byte {
		t.Helper()
		shown, err := os.ReadFile(filepath.Join(b.ep.Dir, "buffered"))
		if err != nil || e.Buf+n > uint64(len(shown)) {
			t.Fatalf("ep/N/buffered: %d bytes, %v; want %d at %#x", len(shown), err, n, e.Buf)
		}
		return shown[e.Buf:][:n]
	}
	a.post(t, ring.WR{Op: ring.OpSend, Context: 1, Offset: 0, Len: 500, Addr: dst})
	e := b.recvDone(t)
	if e.Flags != uint64(fi.RECV|fi.MSG)|uint64(fi.MORE) || e.Len != 500 || !bytes.Equal(shownAt(e, 64), mem[:64]) {
		t.Fatalf("report of 500 bytes with limit 64: %+v, want FI_MORE, len 500 and the first 64 bytes shown", e)
	}
	a.post(t, ring.WR{Op: ring.OpSend, Context: 2, Offset: 1000, Len: 40, Addr: dst})
	small := b.recvDone(t)
	if small.Flags != uint64(fi.RECV|fi.MSG) || small.Len != 40 || !bytes.Equal(shownAt(small, 40), mem[1000:1040]) {
		t.Fatalf("report of 40 bytes: %+v, want no FI_MORE and its 40 bytes shown", small)
	}
	b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.CLAIM), Context: 7, Offset: 2000, Len: 512, Addr: anyAddr, RMAKey: e.Context})
	if c := b.recvDone(t); c.Err != 0 || c.Len != 500 || !bytes.Equal(b.mr.Mem()[2000:2500], mem[:500]) {
		t.Fatalf("claim of the 500-byte message: %+v", c)
	}
	// A rendezvous message (above 16384 bytes) carries no bytes with its
	// request: its first buffered_min bytes are read before its report,
	// and the report of the message sent after it waits, so that reports
	// keep the messages' order.
	for k := range mem[4096:24096] {
		mem[4096+k] = byte(k*5 + 1)
	}
	a.post(t, ring.WR{Op: ring.OpSend, Context: 3, Offset: 4096, Len: 20000, Addr: dst})
	a.post(t, ring.WR{Op: ring.OpSend, Context: 4, Offset: 3000, Len: 8, Addr: dst})
	big, after := b.recvDone(t), b.recvDone(t)
	if big.Flags != uint64(fi.RECV|fi.MSG)|uint64(fi.MORE) || big.Len != 20000 || !bytes.Equal(shownAt(big, 32), mem[4096:4128]) {
		t.Fatalf("report of a 20000-byte rendezvous message: %+v, want FI_MORE and its first 32 bytes (buffered_min)", big)
	}
	if after.Len != 8 || !bytes.Equal(shownAt(after, 8), mem[3000:3008]) {
		t.Fatalf("the report after the rendezvous message's: %+v, want the 8-byte message's", after)
	}
	b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.CLAIM), Context: 8, Offset: 30000, Len: 20000, Addr: anyAddr, RMAKey: big.Context})
	if c := b.recvDone(t); c.Err != 0 || c.Len != 20000 || !bytes.Equal(b.mr.Mem()[30000:50000], mem[4096:24096]) {
		t.Fatalf("claim of the rendezvous message: %+v", c)
	}
	b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.DISCARD), Context: 9, Addr: anyAddr, RMAKey: after.Context})
	if c := b.recvDone(t); c.Err != 0 || c.Context != 9 {
		t.Fatalf("discard: %+v", c)
	}
	// One slot is in use (the 40-byte message's): fill the others, then
	// two more wait.
	for i := range core.BufferedSlots + 1 {
		a.post(t, ring.WR{Op: ring.OpSend, Context: uint64(10 + i), Offset: uint64(i), Len: 8, Addr: dst})
	}
	var reports []ring.CQE
	for range core.BufferedSlots - 1 {
		reports = append(reports, b.recvDone(t))
	}
	time.Sleep(50 * time.Millisecond)
	if c := b.cq.Poll(1); len(c) != 0 {
		t.Fatalf("a report while every slot holds a message: %+v", c[0])
	}
	for i, key := range []uint64{small.Context, reports[0].Context} {
		b.post(t, ring.WR{Op: ring.OpRecv, Flags: uint64(fi.DISCARD), Context: uint64(900 + i), Addr: anyAddr, RMAKey: key})
		var got []ring.CQE
		for len(got) < 2 {
			got = append(got, b.recvDone(t))
		}
		// The discard's completion and the report that waited for its
		// slot, the next message in order.
		var report ring.CQE
		for _, c := range got {
			if c.Context != uint64(900+i) {
				report = c
			}
		}
		k := core.BufferedSlots - 1 + i
		if report.Len != 8 || !bytes.Equal(shownAt(report, 8), mem[k:k+8]) {
			t.Fatalf("after discard %d: %+v, want the report of message %d", i, got, k)
		}
	}
}
