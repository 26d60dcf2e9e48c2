package rxm

import (
	"bytes"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// buffered takes the next buffered-message report of r, and the bytes it
// carries.
func (r *rdm) buffered(t *testing.T) (core.Completion, []byte) {
	t.Helper()
	select {
	case b := <-r.ev.bufs:
		return b.c, b.bytes
	case <-time.After(waitTime):
		t.Fatalf("no buffered message after %v (async errors: %v)", waitTime, r.ev.errors())
	}
	return core.Completion{}, nil
}

// TestBufferedRecv: an endpoint whose fi_info's mode has FI_BUFFERED_RECV.
// fi_msg(3), Buffered Receives: "When a provider receives a message, it
// will write an entry to the completion queue associated with the
// receiving endpoint. ... `len' will be set to the total size of the
// message. ... If the sent message is larger than the buffered amount, the
// CQ entry `flags' will have the FI_MORE bit set." "To claim a message, an
// application must post a receive operation with the FI_CLAIM flag set.
// ... When the claim operation completes, a standard receive completion
// entry will be generated on the completion queue. The `context' of the
// associated CQ entry will be set to the `context' value passed in
// through the fi_recv_context structure, and the CQ entry flags will have
// the FI_CLAIM bit set." "To discard a message, an application must post
// a receive operation with the FI_DISCARD flag set." Eager, rendezvous
// and tagged messages are reported without a posted receive, claimed
// (the bytes as sent) or discarded; a key that holds nothing is ENOMSG.
// A report carries the bytes the endpoint holds ("The CQ entry's `buf'
// will point to a provider managed buffer where the start of the
// received message is located"): an eager message's, and of a rendezvous
// request the first FI_OPT_BUFFERED_MIN bytes, read before the report
// ("When the FI_MORE bit is set, `buf' will reference at least
// FI_OPT_BUFFERED_MIN bytes of data"); core shows them and sets FI_MORE.
func TestBufferedRecv(t *testing.T) {
	p, d := testDomain(t)
	a := newRDM(t, p, d)
	info := loInfo(t, p)
	info.Mode |= fi.BUFFERED_RECV
	b := newRDMWith(t, d, info)
	const bufferedMin = 64
	if err := b.ep.SetOpt("buffered_min", bufferedMin); err != nil {
		t.Fatal(err)
	}

	msgs := []struct {
		kind core.OpKind
		body []byte
		tag  uint64
	}{
		{core.OpSend, pattern(1, 1000), 0},
		{core.OpTSend, pattern(2, 300), 0x77},
		{core.OpSend, pattern(3, 100<<10), 0}, // rendezvous
		{core.OpSend, nil, 0},
		{core.OpSend, pattern(4, 64), 0}, // discarded
	}
	var reports []core.Completion
	for _, m := range msgs {
		s := a.send(t, m.kind, b.addr, m.body, m.tag)
		c, shown := b.buffered(t)
		reports = append(reports, c)
		recvKind := core.OpRecv
		if m.kind == core.OpTSend {
			recvKind = core.OpTRecv
		}
		want := recvKind.CQFlags()
		if c.Flags != want || c.Len != uint64(len(m.body)) || c.Tag != m.tag || c.Key&bufferedKey == 0 || c.Src != a.addr {
			t.Fatalf("report of a %d-byte message: %+v, want flags %v, tag %#x, a claim key, source %v", len(m.body), c, want, m.tag, a.addr)
		}
		wantBytes := m.body
		if len(m.body) > EagerLimit {
			wantBytes = m.body[:bufferedMin] // a rendezvous request: the first bytes, read from the sender
		}
		if !bytes.Equal(shown, wantBytes) {
			t.Fatalf("report of a %d-byte message carries %d bytes, want %d", len(m.body), len(shown), len(wantBytes))
		}
		if len(m.body) <= EagerLimit {
			if sc := a.waitFor(t, s); sc.Err != 0 {
				t.Fatalf("send: %+v", sc)
			}
		}
	}
	b.none(t) // nothing completes on its own: the messages wait for the application

	claim := func(c core.Completion, flags fi.OpFlags, n int) (*core.Op, core.Completion) {
		t.Helper()
		op := b.op(core.OpRecv, make([]byte, n))
		if c.Flags&fi.CQFlags(fi.TAGGED) != 0 {
			op.Kind = core.OpTRecv
		}
		op.Flags, op.Key, op.Context = flags, c.Key, 0xc1a1
		if err := b.ep.Post(op); err != nil {
			t.Fatalf("claim: %v", err)
		}
		return op, b.waitFor(t, op)
	}
	for i, m := range msgs[:4] {
		op, c := claim(reports[i], fi.CLAIM, len(m.body)+16)
		want := op.Kind.CQFlags() | fi.CQFlags(fi.CLAIM)
		if c.Err != 0 || c.Flags != want || c.Len != uint64(len(m.body)) || !bytes.Equal(op.Buf[:c.Len], m.body) || c.Tag != m.tag {
			t.Fatalf("claim of message %d (%d bytes): %+v, %d bytes %.16q; want flags %v", i, len(m.body), c, c.Len, op.Buf[:min(c.Len, uint64(len(op.Buf)))], want)
		}
	}
	// The rendezvous sender completes once its message is claimed.
	for {
		res := a.wait(t)
		if res.op.Kind == core.OpSend && len(res.op.Buf) == 100<<10 {
			if res.c.Err != 0 {
				t.Fatalf("rendezvous send: %+v", res.c)
			}
			break
		}
	}
	if _, c := claim(reports[4], fi.DISCARD, 0); c.Err != 0 || c.Len != 0 {
		t.Fatalf("discard: %+v", c)
	}
	// Claimed or discarded, a key holds nothing any more.
	for _, r := range []core.Completion{reports[0], reports[4], {Key: bufferedKey | 999}} {
		if _, c := claim(r, fi.CLAIM, 64); c.Err != fi.ENOMSG {
			t.Errorf("claim of key %#x again: %+v, want ENOMSG", r.Key, c)
		}
	}
	b.ep.mu.Lock()
	left := b.ep.rx.bytes
	b.ep.mu.Unlock()
	if left != 0 {
		t.Errorf("%d bytes still count against the unexpected limit", left)
	}
	// An endpoint without the mode receives into posted buffers.
	r := a.recv(t, core.OpRecv, 100, 0, 0)
	b.send(t, core.OpSend, a.addr, pattern(5, 50), 0)
	wantRecv(t, r, a.waitFor(t, r), pattern(5, 50), 0, b.addr)
}
