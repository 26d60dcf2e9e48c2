package rxm

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/atomic"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
)

// FuzzDecode feeds arbitrary messages to a connection's decoder and the
// matcher: they must be refused with an error or delivered within their
// bounds (a rendezvous request: reads that fit the receive), never panic.
func FuzzDecode(f *testing.F) {
	eager, _ := wire.AppendHeader(nil, &wire.Header{Type: wire.CtrlEager, Op: wire.OpTagged, Size: 3, Tag: 5})
	f.Add(append(eager, "abc"...), false, uint64(0), false)
	f.Add([]byte("bare tagged"), true, uint64(7), false)
	f.Add(make([]byte, 64), false, uint64(0), false)
	rndv, _ := wire.AppendHeader(nil, &wire.Header{Type: wire.CtrlRndvReq, Op: wire.OpTagged, Size: 20000, Tag: 5, MsgID: 3})
	rh := wire.RndvHeader{Count: 2}
	rh.Iov[0] = wire.RMAIov{Len: 2, Key: wire.RndvKey(0)}
	rh.Iov[1] = wire.RMAIov{Addr: 7, Len: 19998, Key: wire.RndvKey(1)}
	rndv, _ = wire.AppendRndvHeader(rndv, &rh)
	f.Add(rndv, false, uint64(0), false)
	f.Add(rndv[:len(rndv)-20], false, uint64(0), false)
	done, _ := wire.AppendHeader(nil, &wire.Header{Type: wire.CtrlRndvRdDone, MsgID: 3})
	f.Add(done, false, uint64(0), false)
	f.Add(append(eager, "abc"...), false, uint64(0), true)
	seg, _ := wire.AppendHeader(nil, &wire.Header{Type: wire.CtrlSeg, SegSize: 3, SegNo: 2, CtrlData: uint64(wire.SegLast),
		Op: wire.OpTagged, Size: 2*EagerLimit + 3, Tag: 5})
	f.Add(append(seg, "abc"...), false, uint64(0), false)
	f.Add(rndv, false, uint64(0), true)
	f.Fuzz(func(t *testing.T, b []byte, tagged bool, tag uint64, multi bool) {
		c := &conn{peer: &peer{addr: netip.MustParseAddrPort("127.0.0.1:1")}}
		comp := core.Completion{Len: uint64(len(b)), Tag: tag}
		if tagged {
			comp.Flags = fi.CQFlags(fi.TAGGED)
		}
		m, err := c.decode(b, comp)
		if err != nil || m == nil || m.readDone {
			return
		}
		if len(m.payload) > EagerLimit {
			t.Fatalf("payload of %d bytes", len(m.payload))
		}
		mt := matcher{directed: true, limit: UnexpectedLimit, multi: map[*core.Op]*multiRecv{}, minMulti: 2}
		mt.arrived(m)
		kind := core.OpRecv
		if m.tagged {
			kind = core.OpTRecv
		}
		op := &core.Op{Kind: kind, Buf: make([]byte, 4), Ignore: ^uint64(0)}
		if multi && !m.tagged {
			op.Flags = fi.OpFlags(fi.MULTI_RECV)
		}
		var got core.Completion
		op.OnComplete(func(_ *core.Op, c core.Completion) { got = c })
		mt.post(op)
		if got.Offset+got.Len > 4 || mt.bytes != 0 {
			t.Fatalf("completion %+v, %d bytes left", got, mt.bytes)
		}
		for _, r := range mt.started {
			total := uint64(0)
			for i, p := range r.parts {
				if r.offs[i] != int(total) {
					t.Fatalf("read %d at %d, want %d", i, r.offs[i], total)
				}
				total += p.Len
			}
			if total != r.comp.Len || r.comp.Offset+total > uint64(len(op.Buf)) || total+r.comp.OLen != m.size {
				t.Fatalf("reads of %d bytes, completion %+v, for a %d-byte message into %d bytes", total, r.comp, m.size, len(op.Buf))
			}
		}
	})
}

// fakeConn is the MSG endpoint of a connection in FuzzAtomic: sends
// complete at once and are kept.
type fakeConn struct {
	core.Endpoint
	sent [][]byte
}

func (f *fakeConn) Post(op *core.Op) error {
	f.sent = append(f.sent, append([]byte(nil), op.Buf...))
	op.Complete(core.Completion{Flags: op.Kind.CQFlags(), Len: uint64(len(op.Buf))})
	return nil
}

// FuzzAtomic feeds arbitrary atomic requests and responses to a
// connection, over 64 bytes of exposed memory (key 1 read-write, key 2
// read-only) and one fi_fetch_atomic of ours in flight (msg_id 5, 8
// bytes of result): no panic; a request is refused as malformed or
// answered with exactly one response that decodes, a status of 0,
// -FI_EACCES, -FI_EOPNOTSUPP or -FI_EMSGSIZE, and for success the result
// the kind calls for; memory outside the exposed bytes is never touched
// and nothing is kept; a response completes our atomic at most once,
// within its result buffer.
func FuzzAtomic(f *testing.F) {
	req := wire.AtomicRequest{Datatype: fi.UINT64, AtomicOp: fi.SUM, Count: 1, Operand: make([]byte, 8)}
	req.Ioc[0] = wire.RMAIoc{Addr: 8, Count: 1, Key: 1}
	body, _ := req.AppendBody(nil, wire.OpAtomicFetch)
	h := req.Header(0, 9, wire.OpAtomicFetch)
	f.Add(byte(h.Type), byte(h.Op), h.Tag, h.MsgID, body)
	req.Ioc[0].Key = 2
	body, _ = req.AppendBody(nil, wire.OpAtomic)
	f.Add(byte(wire.CtrlAtomic), byte(wire.OpAtomic), h.Tag, uint64(0), body)
	resp := wire.AtomicResponse{Result: make([]byte, 8)}
	body, _ = resp.AppendBody(nil, wire.OpAtomicFetch, fi.UINT64)
	f.Add(byte(wire.CtrlAtomicResp), byte(wire.OpAtomicFetch), wire.AtomicTag(fi.UINT64, fi.SUM, 0), uint64(5), body)
	f.Fuzz(func(t *testing.T, typ, op byte, tag, msgID uint64, body []byte) {
		ev := &events{}
		mem := make([]byte, 192)
		ev.Expose(1, mem[64:128], fi.REMOTE_READ|fi.REMOTE_WRITE)
		ev.Expose(2, mem[128:], fi.REMOTE_READ)
		e := &endpoint{ev: ev, atomics: map[uint64]*sendItem{}}
		tcp := &fakeConn{}
		c := &conn{ep: e, tcp: tcp, peer: &peer{}}
		var comps []core.Completion
		mine := &core.Op{Kind: core.OpFetchAtomic, Datatype: fi.UINT64, AtomicOp: fi.SUM, Result: make([]byte, 8)}
		mine.OnComplete(func(_ *core.Op, c core.Completion) { comps = append(comps, c) })
		e.atomics[5] = &sendItem{op: mine, atomic: &atomicSend{id: 5, conn: c, sent: true}}
		e.txOut = 1

		h := wire.Header{Type: wire.CtrlType(typ), Op: wire.Op(op), Tag: tag, MsgID: msgID, Size: uint64(len(body))}
		if h.Type == wire.CtrlAtomicResp {
			if err := e.atomicAnswered(c, &h, body); err == nil && len(comps) != 1 {
				t.Fatalf("an accepted response made %d completions", len(comps))
			}
			if len(comps) > 1 || e.txOut != 1-len(comps) {
				t.Fatalf("%d completions, txOut %d", len(comps), e.txOut)
			}
			return
		}
		recv := c.newBuf()
		err := e.serveAtomic(c, &h, body, recv)
		if !bytes.Equal(mem[:64], make([]byte, 64)) {
			t.Fatalf("memory before the exposed bytes was touched")
		}
		if len(e.replies) != 0 || c.replying != 0 {
			t.Fatalf("%d responses kept, %d in flight", len(e.replies), c.replying)
		}
		if err != nil {
			if len(tcp.sent) != 0 {
				t.Fatalf("a refused request was answered")
			}
			return
		}
		if len(tcp.sent) != 1 {
			t.Fatalf("%d responses", len(tcp.sent))
		}
		var rh wire.Header
		if err := rh.Decode(tcp.sent[0]); err != nil {
			t.Fatal(err)
		}
		r, err := wire.DecodeAtomicResponse(&rh, tcp.sent[0][wire.HeaderSize:])
		if err != nil || rh.MsgID != msgID || rh.Op != h.Op {
			t.Fatalf("response %+v: %v", rh, err)
		}
		switch r.Status {
		case 0, -int32(fi.EACCES), -int32(fi.EOPNOTSUPP), -int32(fi.EMSGSIZE):
		default:
			t.Fatalf("status %d", r.Status)
		}
		q, _ := wire.DecodeAtomicRequest(&h, body)
		n := 0
		for _, v := range q.Ioc[:q.Count] {
			n += int(v.Count) * atomic.Size(q.Datatype)
		}
		if r.Status == 0 && h.Op != wire.OpAtomic && len(r.Result) != n {
			t.Fatalf("a result of %d bytes for %d", len(r.Result), n)
		}
	})
}

// sarByte is byte k of fuzzed segmented message id.
func sarByte(id uint64, k int) byte { return byte(int(id)*31 + k*7 + k>>8) }

// FuzzSAR feeds a connection a sequence of segments, each made from 6
// bytes of script (msg_id 0..3, segment type, seg_no, the message's size
// in 16384-byte units plus 6400 bytes, this segment's size in 64-byte
// units: 0 means 16384, and the tag; a first byte with bit 7 posts a
// receive instead) and decoded from the wire, with receives of room bytes
// posted before (recvs of them), between and after: no panic; a segment is
// refused or taken; what unexpected messages hold is what the matcher
// counts; a receive completes once, within its buffer, with len + olen
// the message's size and the message's bytes; when the connection ends
// (at the first refused segment, or after the script) nothing of it is
// left and every matched receive has completed.
func FuzzSAR(f *testing.F) {
	whole := func(id, size byte, tag byte) []byte { // a message of size units + 6400 bytes, as rxm sends it
		var s []byte
		for no := range int(size) + 1 {
			typ, n := byte(wire.SegMiddle), byte(0)
			switch {
			case no == int(size):
				typ, n = byte(wire.SegLast), 100
			case no == 0:
				typ = byte(wire.SegFirst)
			}
			s = append(s, id, typ, byte(no), size, n, tag)
		}
		return s
	}
	f.Add(whole(1, 2, 0), uint8(0), uint16(60000))
	f.Add(whole(1, 3, 0), uint8(2), uint16(100))
	f.Add(append(whole(1, 1, 5), whole(2, 4, 5)...), uint8(1), uint16(20000))
	il := append(whole(1, 2, 0), whole(2, 2, 0)...)
	il = append(append(append(il[:6:6], il[18:24]...), il[6:18]...), il[24:]...) // interleaved
	f.Add(il, uint8(1), uint16(40000))
	f.Add([]byte{1, 2, 1, 2, 0, 0}, uint8(0), uint16(0))
	mid := whole(3, 3, 0)
	f.Add(append(append(mid[:12:12], 0x80, 0, 0, 0, 0, 0), mid[12:]...), uint8(0), uint16(50000))
	f.Fuzz(func(t *testing.T, script []byte, recvs uint8, room uint16) {
		e := &endpoint{}
		e.rx = matcher{limit: UnexpectedLimit, multi: map[*core.Op]*multiRecv{}, minMulti: DefaultMinMultiRecv}
		c := &conn{ep: e, peer: &peer{addr: netip.MustParseAddrPort("127.0.0.1:1")}}
		type result struct {
			op    *core.Op
			comps []core.Completion
		}
		var results []*result
		post := func() {
			r := &result{op: &core.Op{Kind: core.OpRecv, Buf: make([]byte, room)}}
			r.op.OnComplete(func(_ *core.Op, c core.Completion) { r.comps = append(r.comps, c) })
			results = append(results, r)
			e.rx.post(r.op)
		}
		for range recvs % 5 {
			post()
		}
		sent := map[[2]uint64]bool{} // msg_id and size of the segments taken
		check := func() {
			held := 0
			for q := range e.rx.unexp {
				for _, m := range e.rx.unexp[q] {
					held += m.cost()
					if m.sar != nil && uint64(len(m.payload)) != m.sar.got {
						t.Fatalf("unexpected message holds %d bytes, %d came", len(m.payload), m.sar.got)
					}
				}
			}
			if held != e.rx.bytes {
				t.Fatalf("unexpected messages hold %d bytes, the matcher counts %d", held, e.rx.bytes)
			}
			for _, s := range c.sar {
				if s.got >= s.hdr.Size || s.hdr.Size <= EagerLimit {
					t.Fatalf("message being received: %d of %d bytes", s.got, s.hdr.Size)
				}
			}
		}
		for ; len(script) >= 6; script = script[6:] {
			if script[0]&0x80 != 0 { // a receive posted here instead
				post()
				continue
			}
			id, typ, no, units, segSize, tag := uint64(script[0]%4), script[1]%4, script[2], script[3]%9, uint16(script[4])*64, script[5]
			if segSize == 0 {
				segSize = EagerLimit
			}
			size := uint64(units)*EagerLimit + 6400
			h := wire.Header{Type: wire.CtrlSeg, SegSize: segSize, SegNo: uint32(no), MsgID: id, CtrlData: uint64(typ),
				Size: size, Tag: uint64(tag)}
			b, err := wire.AppendHeader(nil, &h)
			if err != nil {
				break // the wire refuses to encode it: a peer could still send it, as Decode checks
			}
			var off uint64
			if s := c.sar[id]; s != nil {
				off = s.got
			}
			for k := range int(segSize) {
				b = append(b, sarByte(id, int(off)+k))
			}
			m, err := c.decode(b, core.Completion{Len: uint64(len(b))})
			if err != nil {
				break
			}
			m.conn = c
			e.mu.Lock()
			fin, err := e.segmentArrived(c, m)
			e.mu.Unlock()
			if err != nil {
				break
			}
			if fin != nil {
				fin()
			}
			sent[[2]uint64{id, size}] = true
			check()
		}
		// Receives for what is left, then the connection ends.
		for range len(e.rx.unexp[0]) {
			post()
		}
		e.mu.Lock()
		fins := e.sarGoneLocked(c, fi.ECONNRESET)
		e.rx.dropConn(c)
		e.mu.Unlock()
		for _, fin := range fins {
			fin()
		}
		if len(c.sar) != 0 || e.rx.bytes != 0 || len(e.rx.unexp[0]) != 0 {
			t.Fatalf("after the end: %d messages being received, %d bytes held", len(c.sar), e.rx.bytes)
		}
		check()
		for i, r := range results {
			switch {
			case len(r.comps) > 1:
				t.Fatalf("receive %d completed %d times", i, len(r.comps))
			case len(r.comps) == 0:
				continue // still posted
			}
			got := r.comps[0]
			if got.Err == fi.ECONNRESET {
				continue
			}
			if got.Err != 0 && got.Err != fi.ETRUNC || got.Len > uint64(room) {
				t.Fatalf("receive %d: %+v into %d bytes", i, got, room)
			}
			// Which message: the one whose size and bytes fit.
			ok := false
			for m := range sent {
				id, size := m[0], m[1]
				match := got.Len+got.OLen == size
				for k := range int(got.Len) {
					match = match && r.op.Buf[k] == sarByte(id, k)
				}
				ok = ok || match
			}
			if !ok {
				t.Fatalf("receive %d: %+v holds no message's bytes", i, got)
			}
		}
	})
}
