package rxm

import (
	"bytes"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// rma posts an fi_write (or fi_read) of buf to dst's region key at addr,
// with flags and CQ data.
func (r *rdm) rma(t testing.TB, kind core.OpKind, dst fi.Addr, buf []byte, addr, key uint64, flags fi.OpFlags, data uint64) *core.Op {
	t.Helper()
	op := r.op(kind, buf)
	op.Peer, op.Addr, op.Key, op.Flags, op.Data = dst, addr, key, flags, data
	if err := r.ep.Post(op); err != nil {
		t.Fatalf("post of kind %d: %v", kind, err)
	}
	return op
}

// remote waits for the endpoint's next remote event after the first n.
func (r *rdm) remote(t testing.TB, n int) core.Completion {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for time.Now().Before(deadline) {
		r.ev.mu.Lock()
		rs := r.ev.remotes
		r.ev.mu.Unlock()
		if len(rs) > n {
			return rs[n]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no remote event after %d (async errors: %v)", n, r.ev.errors())
	return core.Completion{}
}

// numRemotes is how many remote events the endpoint has had.
func (r *rdm) numRemotes() int {
	r.ev.mu.Lock()
	defer r.ev.mu.Unlock()
	return len(r.ev.remotes)
}

// TestRMA does fi_write, fi_writedata, a delivery-complete write, an
// injected write and fi_read both ways between two RDM endpoints, the
// first operation of each way opening the connection, and checks the
// data, the initiator's completions and the target's remote events. A
// rendezvous message in between makes no remote event.
func TestRMA(t *testing.T) {
	p, d := testDomain(t)
	a, b := newRDM(t, p, d), newRDM(t, p, d)
	const key = 0x5eed
	mem := map[*rdm][]byte{a: make([]byte, 8192), b: make([]byte, 8192)}
	for r, m := range mem {
		r.ev.Expose(key, m, fi.REMOTE_READ|fi.REMOTE_WRITE)
	}
	wantDone := func(t *testing.T, r *rdm, op *core.Op) {
		t.Helper()
		if c := r.waitFor(t, op); c.Err != 0 || c.Len != uint64(len(op.Buf)) || c.Flags != op.Kind.CQFlags() {
			t.Fatalf("completion %+v of kind %d, want %v and %d bytes", c, op.Kind, op.Kind.CQFlags(), len(op.Buf))
		}
	}
	wantRemote := func(t *testing.T, r *rdm, n int, flags fi.CQFlags, size, data uint64) {
		t.Helper()
		if c := r.remote(t, n); c.Flags != flags || c.Len != size || c.Data != data || c.Err != 0 {
			t.Fatalf("remote event %+v, want flags %v, %d bytes, data %#x", c, flags, size, data)
		}
	}
	for i, dir := range []struct{ from, to *rdm }{{a, b}, {b, a}} {
		from, to, tm := dir.from, dir.to, mem[dir.to]
		n := to.numRemotes()

		w := pattern(i, 1000)
		wantDone(t, from, from.rma(t, core.OpWrite, to.addr, w, 100, key, 0, 0))
		wantRemote(t, to, n, fi.CQFlags(fi.RMA|fi.REMOTE_WRITE), 1000, 0)
		if !bytes.Equal(tm[100:1100], w) {
			t.Fatalf("write: target memory differs")
		}

		w = pattern(i+1, 3000)
		wantDone(t, from, from.rma(t, core.OpWrite, to.addr, w, 2000, key, fi.OpFlags(fi.REMOTE_CQ_DATA), 0x7777))
		wantRemote(t, to, n+1, fi.CQFlags(fi.RMA|fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA), 3000, 0x7777)
		if !bytes.Equal(tm[2000:5000], w) {
			t.Fatalf("writedata: target memory differs")
		}

		w = pattern(i+2, 500)
		wantDone(t, from, from.rma(t, core.OpWrite, to.addr, w, 5000, key, fi.DELIVERY_COMPLETE, 0))
		wantRemote(t, to, n+2, fi.CQFlags(fi.RMA|fi.REMOTE_WRITE), 500, 0)
		if !bytes.Equal(tm[5000:5500], w) {
			t.Fatalf("delivery-complete write: target memory differs")
		}

		w = pattern(i+3, InjectSize)
		orig := append([]byte(nil), w...)
		inj := from.rma(t, core.OpWrite, to.addr, w, 6000, key, fi.INJECT, 0)
		clear(w) // the application's buffer is free once Post returns
		if c := from.waitFor(t, inj); c.Err != 0 || c.Flags != inj.Kind.CQFlags() {
			t.Fatalf("inject write completion %+v", c)
		}
		wantRemote(t, to, n+3, fi.CQFlags(fi.RMA|fi.REMOTE_WRITE), InjectSize, 0)
		if !bytes.Equal(tm[6000:6000+InjectSize], orig) {
			t.Fatalf("inject write: target memory differs")
		}

		// A rendezvous message: rxm's own reads of it are no remote event.
		rv := to.recv(t, core.OpRecv, 3*EagerLimit, 0, 0)
		big := pattern(i, 2*EagerLimit)
		wantDone(t, from, from.send(t, core.OpSend, to.addr, big, 0))
		wantRecv(t, rv, to.waitFor(t, rv), big, 0, from.addr)

		// The initiator's read of the target: the target's remote event.
		nf := from.numRemotes()
		rd := from.rma(t, core.OpRead, to.addr, make([]byte, 2500), 2000, key, 0, 0)
		wantDone(t, from, rd)
		if !bytes.Equal(rd.Buf, tm[2000:4500]) {
			t.Fatalf("read: data differs")
		}
		wantRemote(t, to, n+4, fi.CQFlags(fi.RMA|fi.REMOTE_READ), 2500, 0)
		if got := from.numRemotes(); got != nf {
			t.Fatalf("the initiator of the read had %d remote events, want %d", got, nf)
		}
	}
	time.Sleep(50 * time.Millisecond)
	for _, r := range []*rdm{a, b} {
		if got := r.numRemotes(); got != 5 {
			t.Errorf("%d remote events, want 5", got)
		}
		if errs := r.ev.errors(); len(errs) > 0 {
			t.Errorf("async errors: %v", errs)
		}
	}
	if a.liveConns() != 1 || b.liveConns() != 1 {
		t.Errorf("connections: %d and %d, want one each", a.liveConns(), b.liveConns())
	}
}

// TestRMAErrors checks what Post refuses, and that a bad key ends only the
// connection of the peer that used it: the target keeps serving another
// peer, and the offender connects anew for its next operation.
func TestRMAErrors(t *testing.T) {
	p, d := testDomain(t)
	a, b, c := newRDM(t, p, d), newRDM(t, p, d), newRDM(t, p, d)
	const key = 0x1234
	mem := make([]byte, 4096)
	b.ev.Expose(key, mem, fi.REMOTE_READ|fi.REMOTE_WRITE)
	b.ev.Expose(key+1, make([]byte, 4096), fi.REMOTE_READ)

	for _, bad := range []*core.Op{
		{Kind: core.OpWrite, Buf: make([]byte, 10), Key: key},                                           // no peer
		{Kind: core.OpRead, Buf: make([]byte, 10), Key: key, Peer: b.addr, Flags: fi.INJECT},            // injected read
		{Kind: core.OpWrite, Buf: make([]byte, InjectSize+1), Key: key, Peer: b.addr, Flags: fi.INJECT}, // too long
	} {
		if err := a.ep.Post(bad); core.Code(err) != fi.EINVAL {
			t.Errorf("post of %+v: %v, want EINVAL", bad, err)
		}
	}
	info := loInfo(t, p).Clone()
	info.Caps &^= fi.RMA | fi.READ | fi.WRITE | fi.REMOTE_READ | fi.REMOTE_WRITE | fi.RMA_EVENT
	norma := newRDMWith(t, d, info)
	if err := norma.ep.Post(&core.Op{Kind: core.OpWrite, Buf: make([]byte, 10), Peer: b.addr}); core.Code(err) != fi.EOPNOTSUPP {
		t.Errorf("write without FI_RMA: %v, want EOPNOTSUPP", err)
	}

	for i, bad := range []struct {
		kind core.OpKind
		key  uint64
		addr uint64
	}{
		{core.OpWrite, key + 99, 0},   // no such key
		{core.OpRead, key + 99, 0},    // no such key
		{core.OpWrite, key + 1, 0},    // read-only
		{core.OpRead, key, 4000},      // out of range
		{core.OpWrite, 0x80000003, 0}, // a rendezvous key not in use
	} {
		// c works with b before, during and after.
		cw := pattern(i, 100)
		if r := c.rma(t, core.OpWrite, b.addr, cw, 0, key, fi.DELIVERY_COMPLETE, 0); c.waitFor(t, r).Err != 0 {
			t.Fatalf("case %d: c's write failed", i)
		}
		op := a.rma(t, bad.kind, b.addr, make([]byte, 200), bad.addr, bad.key, fi.DELIVERY_COMPLETE, 0)
		if comp := a.waitFor(t, op); comp.Err == 0 {
			t.Fatalf("case %d: kind %d key %#x at %d: completed without error", i, bad.kind, bad.key, bad.addr)
		}
		deadline := time.Now().Add(waitTime)
		for a.liveConns() != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if a.liveConns() != 0 {
			t.Fatalf("case %d: a still has %d connections", i, a.liveConns())
		}
		rd := c.rma(t, core.OpRead, b.addr, make([]byte, 100), 0, key, 0, 0)
		if comp := c.waitFor(t, rd); comp.Err != 0 || !bytes.Equal(rd.Buf, cw) {
			t.Fatalf("case %d: c's read: %+v %v", i, comp, rd.Buf[:8])
		}
		// a's next operation connects again.
		aw := pattern(i+1, 50)
		if r := a.rma(t, core.OpWrite, b.addr, aw, 1000, key, fi.DELIVERY_COMPLETE, 0); a.waitFor(t, r).Err != 0 {
			t.Fatalf("case %d: a's write after the bad one failed", i)
		}
		if n := len(b.ev.errors()); n != i+1 {
			t.Fatalf("case %d: b has %d async errors, want %d", i, n, i+1)
		}
	}
	if c.liveConns() != 1 {
		t.Errorf("c has %d connections, want 1", c.liveConns())
	}
}
