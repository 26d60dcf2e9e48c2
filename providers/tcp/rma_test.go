package tcp

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// TestRMA writes into and reads from a peer's exposed memory: plain, with
// remote CQ data, with delivery complete, several in flight, then a read
// of everything back; each remote operation is reported to the target.
func TestRMA(t *testing.T) {
	p := connect(t)
	mem := make([]byte, 1<<20)
	p.srv.ev.Expose(0x1234, mem, fi.REMOTE_READ|fi.REMOTE_WRITE)

	var want [1 << 20]byte
	for i := range 64 {
		n := 1 + i*4099%16384
		off := uint64(i * 16384)
		src := pattern(i, n)
		copy(want[off:], src)
		op := &core.Op{Kind: core.OpWrite, Buf: src, Addr: off, Key: 0x1234, Context: uint64(i)}
		switch i % 3 {
		case 1:
			op.Flags, op.Data = fi.OpFlags(fi.REMOTE_CQ_DATA), uint64(i)
		case 2:
			op.Flags = fi.DELIVERY_COMPLETE
		}
		post(t, p.cli.ep, op)
	}
	for range 64 {
		d := waitDone(t, p.cli.done)
		if d.c.Err != 0 || d.c.Flags != fi.CQFlags(fi.RMA|fi.WRITE) || d.c.Len != uint64(len(d.op.Buf)) {
			t.Fatalf("write %d completion %+v", d.op.Context, d.c)
		}
	}
	for i := range 64 {
		c := <-p.srv.ev.RemoteCh
		want := fi.CQFlags(fi.RMA | fi.REMOTE_WRITE)
		if i%3 == 1 {
			want |= fi.CQFlags(fi.REMOTE_CQ_DATA)
		}
		if c.Flags != want || (i%3 == 1 && c.Data != uint64(i)) {
			t.Fatalf("remote event %d: %+v", i, c)
		}
	}
	got := make([]byte, len(mem))
	post(t, p.cli.ep, &core.Op{Kind: core.OpRead, Buf: got[:512<<10], Addr: 0, Key: 0x1234, Context: 1})
	post(t, p.cli.ep, &core.Op{Kind: core.OpRead, Buf: got[512<<10:], Addr: 512 << 10, Key: 0x1234, Context: 2})
	for i := range 2 {
		d := waitDone(t, p.cli.done)
		if d.c.Err != 0 || d.c.Flags != fi.CQFlags(fi.RMA|fi.READ) || d.op.Context != uint64(i+1) {
			t.Fatalf("read completion %+v", d)
		}
	}
	if !bytes.Equal(got, want[:]) || !bytes.Equal(mem, want[:]) {
		t.Fatal("memory differs from what was written")
	}
	if c := <-p.srv.ev.RemoteCh; c.Flags != fi.CQFlags(fi.RMA|fi.REMOTE_READ) || c.Len != 512<<10 {
		t.Fatalf("remote read event %+v", c)
	}
}

// TestRMABadAccess: a write to an unknown key or a read of memory exposed
// for writing only ends the connection with fi.EIO, as libfabric does; the
// initiator's operation fails.
func TestRMABadAccess(t *testing.T) {
	for _, tt := range []struct {
		name string
		op   core.Op
	}{
		{"unknown key", core.Op{Kind: core.OpWrite, Buf: []byte("x"), Key: 99}},
		{"read of write-only", core.Op{Kind: core.OpRead, Buf: make([]byte, 4), Key: 7}},
		{"beyond the end", core.Op{Kind: core.OpWrite, Buf: make([]byte, 8), Addr: 60, Key: 7}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := connect(t)
			p.srv.ev.Expose(7, make([]byte, 64), fi.REMOTE_WRITE)
			op := tt.op
			post(t, p.cli.ep, &op)
			f := p.srv.ev.WaitFailed(t)
			if !errors.Is(f.Err, fi.EIO) {
				t.Errorf("target failed with %v, want EIO", f.Err)
			}
			p.cli.ev.WaitShutdownOrFailed(t)
			if op.Kind == core.OpRead {
				if d := waitDone(t, p.cli.done); d.c.Err != fi.ECANCELED {
					t.Errorf("read completion %+v, want ECANCELED", d.c)
				}
			}
		})
	}
}

// TestRMAOpReusedOnCompletion: the initiator's completion function gives
// each read's Op back for reuse at once, on the goroutine that completes
// it, as core's Op pool does; the writer that wrote the request must not
// look at the Op after that (the race detector checks it).
func TestRMAOpReusedOnCompletion(t *testing.T) {
	p := connect(t)
	mem := pattern(7, 4096)
	p.srv.ev.Expose(0x77, mem, fi.REMOTE_READ)
	const n = 1000
	reused := make(chan done, 2*n) // a second completion of an Op must not block
	p.cli.ep.complete = func(op *core.Op, c core.Completion) {
		k := *op
		*op = core.Op{} // back to the pool
		reused <- done{&k, c}
	}
	got := make([]byte, 64)
	for i := range n {
		post(t, p.cli.ep, &core.Op{Kind: core.OpRead, Buf: got, Addr: uint64(i % 64), Key: 0x77, Context: uint64(i + 1)})
		d := waitDone(t, reused)
		if d.c.Err != 0 || d.op.Context != uint64(i+1) || !bytes.Equal(got, mem[i%64:][:64]) {
			t.Fatalf("read %d: completion of context %d: %+v", i+1, d.op.Context, d.c)
		}
	}
	noDone(t, reused, 50*time.Millisecond)
}
