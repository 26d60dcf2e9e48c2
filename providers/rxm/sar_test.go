package rxm

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// sarMsg is a segmented message as libfabric's rxm sends it with its
// dynamic receive buffers off (docs/rxm.md 5.4).
type sarMsg struct {
	id    uint64 // msg_id
	op    wire.Op
	flags wire.Flags
	data  uint64
	tag   uint64
	body  []byte
}

// segments returns m's segments, each a tcp payload for rawSend: EagerLimit
// bytes each but the last, every header with the whole message's size,
// op, tag, flags and data and m's msg_id.
func (m sarMsg) segments(t *testing.T, idx uint64) [][]byte {
	t.Helper()
	var segs [][]byte
	for no, off := 0, 0; off < len(m.body); no++ {
		n := min(EagerLimit, len(m.body)-off)
		typ := wire.SegMiddle
		switch {
		case off+n == len(m.body):
			typ = wire.SegLast
		case no == 0:
			typ = wire.SegFirst
		}
		h := wire.Header{Type: wire.CtrlSeg, SegSize: uint16(n), SegNo: uint32(no), ConnID: idx, MsgID: m.id,
			CtrlData: uint64(typ), Op: m.op, Flags: m.flags, Size: uint64(len(m.body)), Data: m.data, Tag: m.tag}
		segs = append(segs, rxmMsg(t, h, m.body[off:off+n]))
		off += n
	}
	return segs
}

// sendSegs sends segs on c.
func sendSegs(t *testing.T, c net.Conn, segs ...[]byte) {
	t.Helper()
	for _, s := range segs {
		rawSend(t, c, s)
	}
}

// wantSAR checks a receive's completion against m: bytes, length, flags,
// tag, data and source.
func wantSAR(t *testing.T, op *core.Op, c core.Completion, m sarMsg, src fi.Addr) {
	t.Helper()
	want := op.Kind.CQFlags()
	if m.flags&wire.FlagRemoteCQData != 0 {
		want |= fi.CQFlags(fi.REMOTE_CQ_DATA)
	}
	switch {
	case c.Err != 0:
		t.Fatalf("receive of %d bytes failed: %v (len %d, olen %d)", len(m.body), c.Err, c.Len, c.OLen)
	case c.Len != uint64(len(m.body)) || !bytes.Equal(op.Buf[:c.Len], m.body):
		t.Fatalf("received %d bytes, want %d bytes (msg_id %d); contents equal: %v", c.Len, len(m.body), m.id,
			bytes.Equal(op.Buf[:min(c.Len, uint64(len(op.Buf)))], m.body[:min(c.Len, uint64(len(m.body)))]))
	case c.Flags != want:
		t.Fatalf("flags %v, want %v", c.Flags, want)
	case op.Kind == core.OpTRecv && c.Tag != m.tag:
		t.Fatalf("tag %#x, want %#x", c.Tag, m.tag)
	case m.flags != 0 && c.Data != m.data:
		t.Fatalf("data %#x, want %#x", c.Data, m.data)
	case c.Src != src:
		t.Fatalf("source %v, want %v", c.Src, src)
	}
}

// sarState reports the segmented messages the endpoint is receiving and
// what unexpected messages hold.
func sarState(r *rdm) (receiving, unexpBytes int) {
	r.ep.mu.Lock()
	defer r.ep.mu.Unlock()
	for c := range r.ep.conns {
		receiving += len(c.sar)
	}
	return receiving, r.ep.rx.bytes
}

// waitReceiving waits until the endpoint has the first segment of msg_id
// id (and no completion comes meanwhile).
func waitReceiving(t *testing.T, r *rdm, id uint64) {
	t.Helper()
	for {
		r.ep.mu.Lock()
		found := false
		for c := range r.ep.conns {
			found = found || c.sar[id] != nil
		}
		r.ep.mu.Unlock()
		if found {
			return
		}
		r.none(t)
	}
}

// takeAll takes the completions of ops, in any order.
func takeAll(t *testing.T, r *rdm, ops ...*core.Op) map[*core.Op]core.Completion {
	t.Helper()
	got := map[*core.Op]core.Completion{}
	for len(got) < len(ops) {
		res := r.wait(t)
		got[res.op] = res.c
	}
	return got
}

// TestSAR: segmented messages of a raw rxm peer (libfabric's form, with
// its dynamic receive buffers off) are received whole: 16385 bytes to the
// SAR limit and beyond, untagged and tagged, with and without remote CQ
// data, with the receive posted before the first segment, between
// segments and after the last; nothing is left behind.
func TestSAR(t *testing.T) {
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	c, idx := rawPeer(t, r, 45000)
	src := fi.SockAddr(canon(netipFrom(t, "127.0.0.1:45000")))
	id := uint64(0)
	for _, n := range []int{EagerLimit + 1, 2 * EagerLimit, 65536, 131071, 131072, 131073, 300000} {
		for _, tagged := range []bool{false, true} {
			for _, withData := range []bool{false, true} {
				for _, when := range []string{"before", "between", "after"} {
					id++
					m := sarMsg{id: id, body: pattern(int(id), n)}
					kind := core.OpRecv
					if tagged {
						m.op, m.tag, kind = wire.OpTagged, 0x1000+id, core.OpTRecv
					}
					if withData {
						m.flags, m.data = wire.FlagRemoteCQData, 0xda7a0000+id
					}
					name := fmt.Sprintf("%d-bytes tagged %v data %v posted %s", n, tagged, withData, when)
					segs := m.segments(t, idx)
					var op *core.Op
					if when == "before" {
						op = r.recv(t, kind, n+100, m.tag, 0)
					}
					sendSegs(t, c, segs[0])
					if when == "between" {
						op = r.recv(t, kind, n+100, m.tag, 0)
					}
					sendSegs(t, c, segs[1:]...)
					if when == "after" {
						// Wait until the message is whole and unexpected.
						for {
							if rc, b := sarState(r); rc == 0 && b == n {
								break
							}
							r.none(t)
						}
						op = r.recv(t, kind, n+100, m.tag, 0)
					}
					t.Run(name, func(t *testing.T) { wantSAR(t, op, r.waitFor(t, op), m, src) })
				}
			}
		}
	}
	if rc, b := sarState(r); rc != 0 || b != 0 {
		t.Errorf("after the messages: %d being received, %d unexpected bytes", rc, b)
	}
	if errs := r.ev.errors(); len(errs) > 0 {
		t.Errorf("async errors: %v", errs)
	}
}

// TestSARInterleaved: segments of several messages interleave on one
// connection, with eager messages between them: each message keeps the
// place of its first segment in the matching order (as rxm matches the
// first segment), and its bytes go where its msg_id says.
func TestSARInterleaved(t *testing.T) {
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	c, idx := rawPeer(t, r, 45001)
	src := fi.SockAddr(canon(netipFrom(t, "127.0.0.1:45001")))
	a := sarMsg{id: 5, op: wire.OpTagged, tag: 7, body: pattern(1, 3*EagerLimit+10)}
	b := sarMsg{id: 9, op: wire.OpTagged, tag: 7, body: pattern(2, 2*EagerLimit+20)}
	eager := pattern(3, 100)
	sa, sb := a.segments(t, idx), b.segments(t, idx)

	// Posted first: the receives take a, b and the eager message in the
	// order of their first segments, though b and the eager message are
	// whole first.
	ops := []*core.Op{r.recv(t, core.OpTRecv, 200000, 7, 0), r.recv(t, core.OpTRecv, 200000, 7, 0), r.recv(t, core.OpTRecv, 200000, 7, 0)}
	sendSegs(t, c, sa[0], sb[0], sa[1], sb[1])
	rawSend(t, c, rxmMsg(t, wire.Eager(idx, wire.OpTagged, uint64(len(eager)), 0, 0, 7), eager))
	sendSegs(t, c, sb[2], sa[2], sa[3])
	got := takeAll(t, r, ops...)
	wantSAR(t, ops[0], got[ops[0]], a, src)
	wantSAR(t, ops[1], got[ops[1]], b, src)
	wantSAR(t, ops[2], got[ops[2]], sarMsg{op: wire.OpTagged, tag: 7, body: eager}, src)

	// Unexpected: the same order when the receives come after.
	a.id, b.id = 6, 10
	sa, sb = a.segments(t, idx), b.segments(t, idx)
	sendSegs(t, c, sa[0], sb[0], sa[1])
	rawSend(t, c, rxmMsg(t, wire.Eager(idx, wire.OpTagged, uint64(len(eager)), 0, 0, 7), eager))
	sendSegs(t, c, sb[1], sb[2], sa[2], sa[3])
	for _, m := range []sarMsg{a, b, {op: wire.OpTagged, tag: 7, body: eager}} {
		op := r.recv(t, core.OpTRecv, 200000, 7, 0)
		wantSAR(t, op, r.waitFor(t, op), m, src)
	}
	if rc, n := sarState(r); rc != 0 || n != 0 {
		t.Errorf("after the messages: %d being received, %d unexpected bytes", rc, n)
	}
}

// TestSARTruncation: a receive shorter than a segmented message gets its
// first bytes and fi.ETRUNC with olen the rest, as rxm reports it, once
// the last segment is in; the connection goes on. A receive without a
// buffer gets one of the message's size; FI_MULTI_RECV places segmented
// messages like others and releases its buffer after them.
func TestSARTruncation(t *testing.T) {
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	c, idx := rawPeer(t, r, 45002)
	src := fi.SockAddr(canon(netipFrom(t, "127.0.0.1:45002")))
	m := sarMsg{id: 1, body: pattern(4, 70000)}
	for i, room := range []int{0, 1, EagerLimit, EagerLimit + 5, 69999} {
		m.id = uint64(i + 1)
		segs := m.segments(t, idx)
		posted := i%2 == 0 // posted before, or taking it unexpected mid-way
		var op *core.Op
		if posted {
			op = r.recv(t, core.OpRecv, room, 0, 0)
		}
		sendSegs(t, c, segs[:2]...)
		if !posted {
			waitReceiving(t, r, m.id)
			op = r.recv(t, core.OpRecv, room, 0, 0)
		}
		sendSegs(t, c, segs[2:]...)
		got := r.waitFor(t, op)
		if got.Err != fi.ETRUNC || got.Len != uint64(room) || got.OLen != uint64(len(m.body)-room) ||
			!bytes.Equal(op.Buf, m.body[:room]) || got.Src != src {
			t.Errorf("receive of %d bytes (posted first %v): %+v, want FI_ETRUNC, len %d, olen %d and the first bytes",
				room, posted, got, room, len(m.body)-room)
		}
	}

	m.id = 100
	dyn := r.op(core.OpRecv, nil)
	if err := r.ep.Post(dyn); err != nil {
		t.Fatal(err)
	}
	sendSegs(t, c, m.segments(t, idx)...)
	wantSAR(t, dyn, r.waitFor(t, dyn), m, src)

	// FI_MULTI_RECV: two messages of 20000 fit 50000 with 10000 left
	// (at least min_multi_recv 1000); the third takes the rest,
	// truncated, and its completion releases the buffer.
	if err := r.ep.SetOpt("min_multi_recv", 1000); err != nil {
		t.Fatal(err)
	}
	mop := postMulti(t, r, 50000)
	msgs := map[int][]byte{}
	for i := range 3 {
		mm := sarMsg{id: uint64(200 + i), body: pattern(20+i, 20000)}
		msgs[20000*i] = mm.body
		sendSegs(t, c, mm.segments(t, idx)...)
	}
	wantMulti(t, r, mop, []multiComp{{0, 20000, false, 0}, {20000, 20000, false, 0}, {40000, 10000, true, fi.ETRUNC}}, msgs)
	if rc, n := sarState(r); rc != 0 || n != 0 {
		t.Errorf("after the messages: %d being received, %d unexpected bytes", rc, n)
	}
	if errs := r.ev.errors(); len(errs) > 0 {
		t.Errorf("async errors: %v", errs)
	}
}

// TestSARPeekDiscard: FI_PEEK sees a segmented message still coming with
// its whole length; FI_PEEK|FI_DISCARD drops it, and its later segments
// are taken and dropped; FI_PEEK|FI_CLAIM keeps it for a claim that gets
// the whole message.
func TestSARPeekDiscard(t *testing.T) {
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	c, idx := rawPeer(t, r, 45003)
	src := fi.SockAddr(canon(netipFrom(t, "127.0.0.1:45003")))
	peek := func(flags fi.OpFlags, key uint64, n int) (*core.Op, core.Completion) {
		t.Helper()
		op := r.op(core.OpTRecv, make([]byte, n))
		op.Tag, op.Flags, op.Key = 3, flags, key
		if err := r.ep.Post(op); err != nil {
			t.Fatal(err)
		}
		return op, r.waitFor(t, op)
	}
	m := sarMsg{id: 1, op: wire.OpTagged, tag: 3, body: pattern(5, 40000)}
	segs := m.segments(t, idx)
	sendSegs(t, c, segs[0])
	waitReceiving(t, r, 1)
	if _, got := peek(fi.PEEK, 0, 0); got.Err != 0 || got.Len != 40000 || got.Tag != 3 {
		t.Errorf("FI_PEEK: %+v, want the length 40000", got)
	}
	if _, got := peek(fi.PEEK|fi.DISCARD, 0, 0); got.Err != 0 || got.Len != 0 {
		t.Errorf("FI_PEEK|FI_DISCARD: %+v", got)
	}
	sendSegs(t, c, segs[1:]...)

	m.id = 2
	segs = m.segments(t, idx)
	sendSegs(t, c, segs[0])
	waitReceiving(t, r, 2)
	if _, got := peek(fi.PEEK|fi.CLAIM, 77, 0); got.Err != 0 || got.Len != 40000 {
		t.Errorf("FI_PEEK|FI_CLAIM: %+v", got)
	}
	sendSegs(t, c, segs[1:]...)
	op, got := peek(fi.CLAIM, 77, 50000)
	wantSAR(t, op, got, m, src)
	if rc, n := sarState(r); rc != 0 || n != 0 {
		t.Errorf("after the messages: %d being received, %d unexpected bytes", rc, n)
	}
}

// TestSARConnectionEnds: when the connection of a segmented message still
// coming ends, its matched receive fails and its unexpected copy is
// dropped (its bytes no longer count against the unexpected limit).
func TestSARConnectionEnds(t *testing.T) {
	p, d := testDomain(t)
	r := newRDM(t, p, d)
	c, idx := rawPeer(t, r, 45004)
	m := sarMsg{id: 1, body: pattern(6, 50000)}
	op := r.recv(t, core.OpRecv, 50000, 0, 0)
	sendSegs(t, c, m.segments(t, idx)[:2]...)
	m.id = 2
	m.op, m.tag = wire.OpTagged, 1
	sendSegs(t, c, m.segments(t, idx)[:1]...)
	for {
		if rc, n := sarState(r); rc == 2 && n == EagerLimit {
			break
		}
		r.none(t)
	}
	c.Close()
	if got := r.waitFor(t, op); got.Err == 0 {
		t.Errorf("receive of a message whose connection ended: %+v", got)
	}
	for {
		if rc, n := sarState(r); rc == 0 && n == 0 {
			break
		}
		r.none(t)
	}
}

// TestSARMalformed: a segment that does not continue a message as rxm
// sends them ends its connection with the reason, and only that
// connection.
func TestSARMalformed(t *testing.T) {
	p, d := testDomain(t)
	r, good := newRDM(t, p, d), newRDM(t, p, d)
	m := sarMsg{id: 4, op: wire.OpTagged, tag: 2, body: pattern(7, 3*EagerLimit+1)}
	seg := func(idx uint64, i int, edit func(b []byte)) []byte {
		b := m.segments(t, idx)[i]
		if edit != nil {
			edit(b)
		}
		return b
	}
	set16 := func(off int, v uint16) func([]byte) { return func(b []byte) { b[off], b[off+1] = byte(v), byte(v>>8) } }
	set := func(off int, v byte) func([]byte) { return func(b []byte) { b[off] = v } }
	for i, tc := range []struct {
		name, why string
		msgs      func(idx uint64) [][]byte
	}{
		{"middle-first", "not a message being received", func(idx uint64) [][]byte { return [][]byte{seg(idx, 1, nil)} }},
		{"last-first", "segment 3 (type 3) of msg_id 4", func(idx uint64) [][]byte { return [][]byte{seg(idx, 3, nil)} }},
		{"first-again", "a first segment for msg_id 4", func(idx uint64) [][]byte {
			return [][]byte{seg(idx, 0, nil), seg(idx, 0, nil)}
		}},
		{"skipped", "segment 2 comes next", func(idx uint64) [][]byte {
			return [][]byte{seg(idx, 0, nil), seg(idx, 1, nil), seg(idx, 3, nil)}
		}},
		{"other-tag", "differs from the first", func(idx uint64) [][]byte {
			return [][]byte{seg(idx, 0, nil), seg(idx, 1, set(56, 9))}
		}},
		{"other-size", "differs from the first", func(idx uint64) [][]byte {
			return [][]byte{seg(idx, 0, nil), seg(idx, 1, set(41, 0x70))}
		}},
		{"short-middle", "want 16384 and more to come", func(idx uint64) [][]byte {
			b := seg(idx, 1, set16(2, 100))
			return [][]byte{seg(idx, 0, nil), b[:wire.HeaderSize+100]}
		}},
		{"early-last", "remain", func(idx uint64) [][]byte {
			return [][]byte{seg(idx, 0, nil), seg(idx, 1, set(24, byte(wire.SegLast)))}
		}},
		{"small", "up to 16384 go as one eager message", func(idx uint64) [][]byte {
			h := wire.Header{Type: wire.CtrlSeg, SegSize: 10, ConnID: idx, CtrlData: uint64(wire.SegFirst), Size: 100}
			return [][]byte{rxmMsg(t, h, make([]byte, 10))}
		}},
		{"no-type", "without a segment type", func(idx uint64) [][]byte {
			return [][]byte{seg(idx, 0, set(24, 0))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, idx := rawPeer(t, r, uint16(46000+i))
			sendSegs(t, c, tc.msgs(idx)...)
			waitClosed(t, c)
			wantAsyncError(t, r, tc.why)
		})
	}
	for {
		if rc, n := sarState(r); rc == 0 && n == 0 {
			break
		}
		r.none(t)
	}
	// The endpoint still works.
	recv := r.recv(t, core.OpRecv, 64, 0, 0)
	good.send(t, core.OpSend, r.addr, []byte("still here"), 0)
	wantRecv(t, recv, r.waitFor(t, recv), []byte("still here"), 0, good.addr)
}
