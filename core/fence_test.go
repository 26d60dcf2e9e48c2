package core_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestFence: fi_rma(3), FI_FENCE: "Indicates that the requested operation,
// also known as the fenced operation, and any operation posted after the
// fenced operation will be deferred until all previous operations
// targeting the same peer endpoint have completed." A send with
// FI_DELIVERY_COMPLETE stays in flight until the peer posts a receive for
// it (tcp acknowledges a message once it is placed); an RMA write posted
// behind it with FI_FENCE, and a send behind that, wait for it, and run
// once it completes. Without FI_FENCE the write is sent at once and
// completes first.
func TestFence(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		name := "unfenced"
		if fenced {
			name = "fenced"
		}
		t.Run(name, func(t *testing.T) { testFence(t, fenced) })
	}
}

func testFence(t *testing.T, fenced bool) {
	_, mem, key, tx, brx, cqr, post := msgRig(t)
	copy(mem[100:], "written!")
	var fence uint64
	if fenced {
		fence = uint64(fi.FENCE)
	}
	post(tx, ring.WR{Op: ring.OpSend, Context: 1, Offset: 0, Len: 8, Flags: uint64(fi.DELIVERY_COMPLETE | fi.COMPLETION)})
	post(tx, ring.WR{Op: ring.OpWrite, Context: 2, Offset: 100, Len: 8, RMAAddr: 200, RMAKey: key, Flags: fence | uint64(fi.COMPLETION)})
	post(tx, ring.WR{Op: ring.OpSend, Context: 3, Offset: 0, Len: 8, Flags: uint64(fi.COMPLETION)})

	var all []ring.CQE
	written := func() bool { return bytes.Equal(mem[200:208], []byte("written!")) }
	if fenced {
		time.Sleep(300 * time.Millisecond)
		if written() {
			t.Fatal("the fenced write ran while the send before it was in flight")
		}
		if head, tail := cqr.Peek(); head != tail {
			c, _ := ring.DecodeCQE(cqr.Entry(head))
			t.Fatalf("a completion (context %d) before the first send completed", c.Context)
		}
	} else {
		// Not deferred: it is sent, and completes, before the send
		// ahead of it (tcp's one stream still places it behind that send).
		all = reapCQEs(t, cqr, nil, 1, "the unfenced write")
		if all[0].Context != 2 {
			t.Fatalf("first completion %+v: want the unfenced write's", all[0])
		}
	}
	// b takes both sends: the first completes, then the fenced write
	// runs, then the last send.
	post(brx, ring.WR{Op: ring.OpRecv, Context: 11, Offset: 1024, Len: 64, Flags: uint64(fi.COMPLETION)})
	post(brx, ring.WR{Op: ring.OpRecv, Context: 12, Offset: 2048, Len: 64, Flags: uint64(fi.COMPLETION)})
	all = reapCQEs(t, cqr, all, 5, "the sends, receives and write")
	var order []uint64
	for _, c := range all {
		if c.Err != 0 {
			t.Fatalf("completion %+v failed", c)
		}
		if c.Context < 10 {
			order = append(order, c.Context)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); !written(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write never reached the target")
		}
	}
	if fenced && (len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 3) {
		t.Errorf("transmit completions in order %v, want [1 2 3]: the fenced write after the send before it, the send after it last", order)
	}
}

// msgRig connects two tcp FI_EP_MSG endpoints a and b on one CQ and
// registers a region of 4096 bytes both use (remote access); post
// publishes a request on a ring with the region as its buffer.
func msgRig(t *testing.T) (a *core.Object, mem []byte, key uint64, tx, brx, cqr *ring.Ring, post func(*ring.Ring, ring.WR)) {
	t.Helper()
	d := lo(t)
	a, b, _, _, cq := pair(t, d, "bind cq c send,recv")
	x, err := regMR(t, d, "x", 4096, "", "FI_SEND,FI_RECV,FI_READ,FI_WRITE,FI_REMOTE_READ,FI_REMOTE_WRITE")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := x.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	tx, _ = ringsOf(t, a)
	_, brx = ringsOf(t, b)
	creg, err := cq.Region()
	if err != nil {
		t.Fatal(err)
	}
	if cqr, err = ring.Open(creg.Mem); err != nil {
		t.Fatal(err)
	}
	post = func(r *ring.Ring, w ring.WR) {
		t.Helper()
		slot, ok := r.Reserve()
		if !ok {
			t.Fatal("ring full")
		}
		w.Desc = x.Serial
		w.Encode(slot)
		r.Publish(1)
	}
	return a, reg.Mem, x.Impl.(*core.MR).Key(), tx, brx, cqr, post
}
