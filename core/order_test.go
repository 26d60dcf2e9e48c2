package core_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestMsgOrder checks each ordering bit an endpoint's attr/tx_msg_order
// advertises by what the target sees, on tcp and verbs FI_EP_MSG and on
// FI_EP_RDM over each (fi_endpoint(3), "msg_order"). b is the initiator,
// a the target (its receives on a's rx ring); the region m is both sides'
// memory. An advertised bit whose scenario is wrong fails; a bit the
// endpoint does not advertise is skipped; the atomic bits need FI_ATOMIC.
func TestMsgOrder(t *testing.T) { forEachSetup(t, testMsgOrder) }

// Where the scenarios work in m: local sources and results below 2048,
// targets of RMA from 4096, receive buffers from 6144.
const (
	ordSrc = 0
	ordDst = 1024
	ordTgt = 4096
	ordRx  = 6144
)

func testMsgOrder(t *testing.T, g *iovRig) {
	var order fi.MsgOrder
	var caps fi.Caps
	for _, at := range g.b.Impl.Attrs() {
		switch at.Name {
		case "tx_msg_order":
			order, _ = fi.Parse[fi.MsgOrder](strings.TrimSpace(at.Get()))
		case "caps":
			caps, _ = fi.Parse[fi.Caps](strings.TrimSpace(at.Get()))
		}
	}
	if order == 0 {
		t.Fatal("no tx_msg_order")
	}
	ctx := uint64(100)
	next := func() uint64 { ctx++; return ctx }
	// put writes s at off in m (a local source).
	put := func(off uint64, s string) { copy(g.mem[off:], s) }
	send := func(src uint64, n uint64) uint64 {
		c := next()
		g.postWR(t, g.btx, ring.WR{Op: ring.OpSend, Context: c, Desc: g.desc, Offset: src, Len: n, Flags: uint64(fi.COMPLETION)})
		return c
	}
	// recv posts a receive on a and waits until a's provider has it (a
	// message finding no receive may be buffered and placed later, after
	// the operations behind it: rxm's unexpected messages).
	ops := func() int {
		_, after, _ := strings.Cut(g.a.Status().String(), " ops=")
		n, _ := strconv.Atoi(strings.Fields(after)[0])
		return n
	}
	recv := func(buf uint64, n uint64) uint64 {
		c, before := next(), ops()
		g.postWR(t, g.arx, ring.WR{Op: ring.OpRecv, Context: c, Desc: g.desc, Offset: buf, Len: n, Flags: uint64(fi.COMPLETION)})
		for deadline := time.Now().Add(5 * time.Second); ops() == before; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the receive of context %d was never posted (a: %s)", c, g.a.Status())
			}
		}
		return c
	}
	write := func(src, tgt, n uint64) uint64 {
		c := next()
		g.postWR(t, g.btx, ring.WR{Op: ring.OpWrite, Context: c, Desc: g.desc, Offset: src, Len: n, RMAAddr: tgt, RMAKey: g.key, Flags: uint64(fi.COMPLETION)})
		return c
	}
	read := func(dst, tgt, n uint64) uint64 {
		c := next()
		g.postWR(t, g.btx, ring.WR{Op: ring.OpRead, Context: c, Desc: g.desc, Offset: dst, Len: n, RMAAddr: tgt, RMAKey: g.key, Flags: uint64(fi.COMPLETION)})
		return c
	}
	atomicWrite := func(src, tgt uint64) uint64 {
		c := next()
		g.postWR(t, g.btx, ring.WR{Op: ring.OpAtomic, Context: c, Desc: g.desc, Offset: src, Len: 8, RMAAddr: tgt, RMAKey: g.key,
			Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.ATOMIC_WRITE), Flags: uint64(fi.COMPLETION)})
		return c
	}
	atomicRead := func(dst, tgt uint64) uint64 {
		c := next()
		g.postWR(t, g.btx, ring.WR{Op: ring.OpFetchAtomic, Context: c, Len: 8, RMAAddr: tgt, RMAKey: g.key,
			ResultDesc: g.desc, ResultOffset: dst, Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.ATOMIC_READ), Flags: uint64(fi.COMPLETION)})
		return c
	}
	done := func(cs ...uint64) {
		t.Helper()
		for _, c := range cs {
			if e := g.completion(t, c); e.Err != 0 {
				t.Fatalf("context %d failed: %+v", c, e)
			}
		}
	}
	// settles waits until m's bytes at off read want, and stay so.
	settles := func(what string, off uint64, want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); string(g.mem[off:off+uint64(len(want))]) != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: target holds %q, want %q", what, g.mem[off:off+uint64(len(want))], want)
			}
		}
		time.Sleep(20 * time.Millisecond)
		if got := string(g.mem[off : off+uint64(len(want))]); got != want {
			t.Fatalf("%s: target changed to %q after holding %q", what, got, want)
		}
	}
	// inOrder checks that the completions of cs arrive in that order.
	inOrder := func(what string, cs ...uint64) {
		t.Helper()
		g.cqes = reapCQEs(t, g.cq, g.cqes, len(g.cqes)+len(cs), what)
		var seen []uint64
		for _, c := range g.cqes {
			for _, want := range cs {
				if c.Context == want {
					seen = append(seen, c.Context)
				}
			}
		}
		for i := range cs {
			if i >= len(seen) || seen[i] != cs[i] {
				t.Fatalf("%s: completions in order %v, want %v", what, seen, cs)
			}
		}
		done(cs...)
	}

	type scenario struct {
		bit    fi.MsgOrder
		atomic bool
		run    func()
	}
	waw := func() { // the second write is what stays
		put(ordSrc, "first...")
		put(ordSrc+8, "second..")
		done(write(ordSrc, ordTgt, 8), write(ordSrc+8, ordTgt, 8))
		settles("write after write", ordTgt, "second..")
	}
	raw := func() { // the read sees the write before it
		put(ordSrc+16, "written.")
		w, r := write(ordSrc+16, ordTgt+64, 8), read(ordDst, ordTgt+64, 8)
		done(w, r)
		if got := string(g.mem[ordDst : ordDst+8]); got != "written." {
			t.Fatalf("read after write read %q", got)
		}
	}
	rar := func() { inOrder("read after read", read(ordDst+64, ordTgt, 8), read(ordDst+72, ordTgt, 8)) }
	scenarios := []scenario{
		{fi.ORDER_WAW, false, waw}, {fi.ORDER_RMA_WAW, false, waw},
		{fi.ORDER_RAW, false, raw}, {fi.ORDER_RMA_RAW, false, raw},
		{fi.ORDER_RAR, false, rar}, {fi.ORDER_RMA_RAR, false, rar},
		{fi.ORDER_WAR, false, func() { // the read sees the value before the write
			put(ordSrc+24, "newvalue")
			copy(g.mem[ordTgt+128:], "oldvalue")
			r, w := read(ordDst+128, ordTgt+128, 8), write(ordSrc+24, ordTgt+128, 8)
			done(r, w)
			if got := string(g.mem[ordDst+128 : ordDst+136]); got != "oldvalue" {
				t.Fatalf("write after read: the read saw %q", got)
			}
		}},
		{fi.ORDER_SAW, false, func() { // the message finds the write done
			put(ordSrc+32, "landed!!")
			put(ordSrc+40, "message!")
			rc := recv(ordRx, 64)
			w := write(ordSrc+32, ordTgt+192, 8)
			s := send(ordSrc+40, 8)
			done(rc)
			if got := string(g.mem[ordTgt+192 : ordTgt+200]); got != "landed!!" {
				t.Fatalf("send after write: at the message the target held %q", got)
			}
			done(w, s)
		}},
		{fi.ORDER_SAS, false, func() { // the messages match receives in order
			put(ordSrc+48, "message1")
			put(ordSrc+56, "message2")
			r1, r2 := recv(ordRx+64, 64), recv(ordRx+128, 64)
			done(send(ordSrc+48, 8), send(ordSrc+56, 8), r1, r2)
			if a, b := string(g.mem[ordRx+64:ordRx+72]), string(g.mem[ordRx+128:ordRx+136]); a != "message1" || b != "message2" {
				t.Fatalf("send after send: receives hold %q, %q", a, b)
			}
		}},
		{fi.ORDER_RAS, false, func() { // the read sees the message placed
			put(ordSrc+64, "placed!!")
			rc := recv(ordRx+192, 64)
			s, r := send(ordSrc+64, 8), read(ordDst+192, ordRx+192, 8)
			done(rc, s, r)
			if got := string(g.mem[ordDst+192 : ordDst+200]); got != "placed!!" {
				t.Fatalf("read after send read %q", got)
			}
		}},
		{fi.ORDER_WAS, false, func() { // the write lands over the message
			put(ordSrc+72, "sentfirs")
			put(ordSrc+80, "overwrit")
			rc := recv(ordRx+256, 64)
			done(send(ordSrc+72, 8), write(ordSrc+80, ordRx+256, 8), rc)
			settles("write after send", ordRx+256, "overwrit")
		}},
		{fi.ORDER_SAR, false, func() { // the read sees the buffer before the message
			put(ordSrc+88, "messageX")
			copy(g.mem[ordRx+320:], "before..")
			rc := recv(ordRx+320, 64)
			r, s := read(ordDst+256, ordRx+320, 8), send(ordSrc+88, 8)
			done(r, s, rc)
			if got := string(g.mem[ordDst+256 : ordDst+264]); got != "before.." {
				t.Fatalf("send after read: the read saw %q", got)
			}
		}},
		{fi.ORDER_ATOMIC_WAW, true, func() {
			binary.LittleEndian.PutUint64(g.mem[ordSrc+96:], 1)
			binary.LittleEndian.PutUint64(g.mem[ordSrc+104:], 2)
			done(atomicWrite(ordSrc+96, ordTgt+256), atomicWrite(ordSrc+104, ordTgt+256))
			settles("atomic write after write", ordTgt+256, string([]byte{2, 0, 0, 0, 0, 0, 0, 0}))
		}},
		{fi.ORDER_ATOMIC_RAW, true, func() {
			binary.LittleEndian.PutUint64(g.mem[ordSrc+112:], 0x1234)
			w, r := atomicWrite(ordSrc+112, ordTgt+320), atomicRead(ordDst+320, ordTgt+320)
			done(w, r)
			if got := binary.LittleEndian.Uint64(g.mem[ordDst+320:]); got != 0x1234 {
				t.Fatalf("atomic read after write read %#x", got)
			}
		}},
		{fi.ORDER_ATOMIC_RAR, true, func() {
			inOrder("atomic read after read", atomicRead(ordDst+384, ordTgt+256), atomicRead(ordDst+392, ordTgt+256))
		}},
		{fi.ORDER_ATOMIC_WAR, true, func() {
			binary.LittleEndian.PutUint64(g.mem[ordTgt+448:], 7)
			binary.LittleEndian.PutUint64(g.mem[ordSrc+120:], 8)
			r, w := atomicRead(ordDst+448, ordTgt+448), atomicWrite(ordSrc+120, ordTgt+448)
			done(r, w)
			if got := binary.LittleEndian.Uint64(g.mem[ordDst+448:]); got != 7 {
				t.Fatalf("atomic write after read: the read saw %d", got)
			}
		}},
	}
	ran := 0
	for _, s := range scenarios {
		if order&s.bit == 0 || (s.atomic && caps&fi.ATOMIC == 0) {
			continue
		}
		t.Logf("%v", s.bit)
		s.run()
		ran++
	}
	if ran == 0 {
		t.Fatalf("msg_order %v: no scenario ran", order)
	}
}

// postWR publishes w as it is on r, with r's fi_addr (FI_EP_RDM).
func (g *iovRig) postWR(t *testing.T, r *ring.Ring, w ring.WR) {
	t.Helper()
	w.Addr = g.to[r]
	slot, ok := r.Reserve()
	if !ok {
		t.Fatal("ring full")
	}
	w.Encode(slot)
	r.Publish(1)
}
