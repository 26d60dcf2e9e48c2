package rxm

import (
	"net/netip"
	"testing"

	"github.com/fabricfs/fabricfs/core"
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
