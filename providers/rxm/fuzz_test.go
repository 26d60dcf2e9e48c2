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
