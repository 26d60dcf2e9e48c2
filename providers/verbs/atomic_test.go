package verbs

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// u64 is v in the host's byte order, as fi_atomic's buffers hold it.
func u64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

// at is the element at off of b.
func at(b []byte, off uint64) uint64 { return binary.NativeEndian.Uint64(b[off:]) }

// TestAtomics: every operation and datatype the endpoints take, on the
// peer's registered memory by key at an offset into it, with the result
// in memory registered with the domain (Op.ResultMem) and in memory
// registered for the operation alone. fi_atomic(3):
//
//	FI_ATOMIC_WRITE  addr[i] = buf[i]
//	FI_ATOMIC_READ   result[i] = addr[i]
//	FI_SUM           addr[i] = addr[i] + buf[i]
//	FI_CSWAP         if (compare[i] == addr[i]) addr[i] = buf[i]
//
// "the fetch atomic routines return the initial value that was stored at
// the target to the user. The initial value is read into the user
// provided result buffer." The completions are FI_ATOMIC|FI_WRITE for the
// base operation and FI_ATOMIC|FI_READ for the fetching ones.
func TestAtomics(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	target := sharedMem(t, 4096)
	key := regMem(t, db, target, fi.REMOTE_READ|fi.REMOTE_WRITE).Key()
	local := sharedMem(t, 4096)
	lmem := regMem(t, da, local, 0)
	neg := func(v int64) uint64 { return uint64(v) }
	for _, dt := range []fi.AtomicType{fi.INT64, fi.UINT64} {
		for _, registered := range []bool{false, true} {
			const off = 1000
			var resOff uint64 = 2048
			post := func(op *core.Op, want fi.CQFlags) uint64 {
				t.Helper()
				op.Datatype, op.Addr, op.Key = dt, off, key
				if op.Kind != core.OpAtomic {
					op.Result = make([]byte, 8)
					if registered {
						clear(local[resOff:][:8])
						op.Result, op.ResultMem, op.ResultMemOff = local[resOff:][:8], lmem, resOff
					}
				}
				pr.cli.post(t, op)
				d := pr.cli.wait(t)
				if d.c.Err != 0 || d.c.Flags != want {
					t.Fatalf("%v %v (registered result %v): completion %+v, want flags %v", dt, op.AtomicOp, registered, d.c, want)
				}
				if op.Result == nil {
					return 0
				}
				return at(op.Result, 0)
			}
			write, read := fi.CQFlags(fi.ATOMIC|fi.WRITE), fi.CQFlags(fi.ATOMIC|fi.READ)

			post(&core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Buf: u64(neg(-7))}, write)
			if v := at(target, off); v != neg(-7) {
				t.Errorf("%v FI_ATOMIC_WRITE of -7: the target holds %#x", dt, v)
			}
			if r := post(&core.Op{Kind: core.OpFetchAtomic, AtomicOp: fi.ATOMIC_READ}, read); r != neg(-7) {
				t.Errorf("%v FI_ATOMIC_READ: result %#x, want -7", dt, r)
			}
			if v := at(target, off); v != neg(-7) {
				t.Errorf("%v FI_ATOMIC_READ changed the target to %#x", dt, v)
			}
			if r := post(&core.Op{Kind: core.OpFetchAtomic, AtomicOp: fi.SUM, Buf: u64(10)}, read); r != neg(-7) {
				t.Errorf("%v FI_SUM: result %#x, want -7", dt, r)
			}
			if v := at(target, off); v != 3 {
				t.Errorf("%v FI_SUM of 10 to -7: the target holds %#x, want 3", dt, v)
			}
			if r := post(&core.Op{Kind: core.OpCompareAtomic, AtomicOp: fi.CSWAP, Buf: u64(1 << 40), Compare: u64(4)}, read); r != 3 {
				t.Errorf("%v FI_CSWAP (not equal): result %#x, want 3", dt, r)
			}
			if v := at(target, off); v != 3 {
				t.Errorf("%v FI_CSWAP with a compare value that differs swapped: the target holds %#x", dt, v)
			}
			if r := post(&core.Op{Kind: core.OpCompareAtomic, AtomicOp: fi.CSWAP, Buf: u64(1 << 40), Compare: u64(3)}, read); r != 3 {
				t.Errorf("%v FI_CSWAP (equal): result %#x, want 3", dt, r)
			}
			if v := at(target, off); v != 1<<40 {
				t.Errorf("%v FI_CSWAP with an equal compare value: the target holds %#x, want 1<<40", dt, v)
			}
			if at(target, off-8) != 0 || at(target, off+8) != 0 {
				t.Errorf("%v: bytes next to the target element changed", dt)
			}
			clear(target)
		}
	}
}

// TestAtomicInjectAndData: fi_inject_atomic's operand is copied at post
// ("the buffer is available for reuse immediately"); FI_ATOMIC_WRITE with
// remote CQ data takes a receive at the target as an RMA write with CQ
// data does (FI_RX_CQ_DATA).
func TestAtomicInjectAndData(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	target := sharedMem(t, 4096)
	key := regMem(t, db, target, fi.REMOTE_WRITE).Key()
	buf := u64(0x1122334455667788)
	pr.cli.post(t, &core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Datatype: fi.UINT64, Buf: buf, Addr: 8, Key: key, Flags: fi.INJECT})
	clear(buf)
	if d := pr.cli.wait(t); d.c.Err != 0 || at(target, 8) != 0x1122334455667788 {
		t.Errorf("injected FI_ATOMIC_WRITE: %+v, the target holds %#x", d.c, at(target, 8))
	}
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	pr.cli.post(t, &core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Datatype: fi.INT64, Buf: u64(5), Addr: 16, Key: key,
		Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: 0xcafe})
	pr.cli.wait(t)
	d := pr.srv.wait(t)
	if d.c.Err != 0 || d.c.Flags&fi.CQFlags(fi.REMOTE_CQ_DATA) == 0 || d.c.Data != 0xcafe || at(target, 16) != 5 {
		t.Errorf("FI_ATOMIC_WRITE with remote CQ data: the target's receive %+v, the target holds %d", d.c, at(target, 16))
	}
}

// TestQueryAtomic: fi_query_atomic's answers, as libfabric's verbs gives
// them: count 1 and size 8 for the operations the device does, on
// FI_INT64 and FI_UINT64; -FI_ENOSYS for another operation, -FI_EINVAL
// for another datatype; FI_EOPNOTSUPP for endpoints without atomics.
func TestQueryAtomic(t *testing.T) {
	p, da, _ := twoDevices(t, nil)
	dg := openDomain(t, p, da.name+dgramSuffix)
	for _, c := range []struct {
		d    *domain
		t    fi.EPType
		k    core.OpKind
		dt   fi.AtomicType
		op   fi.AtomicOp
		want fi.Errno
	}{
		{da, fi.EP_MSG, core.OpAtomic, fi.INT64, fi.ATOMIC_WRITE, 0},
		{da, fi.EP_MSG, core.OpAtomic, fi.UINT64, fi.ATOMIC_WRITE, 0},
		{da, fi.EP_MSG, core.OpFetchAtomic, fi.INT64, fi.ATOMIC_READ, 0},
		{da, fi.EP_MSG, core.OpFetchAtomic, fi.UINT64, fi.SUM, 0},
		{da, fi.EP_MSG, core.OpCompareAtomic, fi.UINT64, fi.CSWAP, 0},
		{da, fi.EP_MSG, core.OpAtomic, fi.UINT64, fi.SUM, fi.ENOSYS},
		{da, fi.EP_MSG, core.OpFetchAtomic, fi.UINT64, fi.ATOMIC_WRITE, fi.ENOSYS},
		{da, fi.EP_MSG, core.OpFetchAtomic, fi.UINT64, fi.MIN, fi.ENOSYS},
		{da, fi.EP_MSG, core.OpCompareAtomic, fi.UINT64, fi.CSWAP_NE, fi.ENOSYS},
		{da, fi.EP_MSG, core.OpAtomic, fi.FLOAT, fi.BOR, fi.ENOSYS},
		{da, fi.EP_MSG, core.OpAtomic, fi.DOUBLE, fi.ATOMIC_WRITE, fi.EINVAL},
		{da, fi.EP_MSG, core.OpFetchAtomic, fi.FLOAT, fi.SUM, fi.EINVAL},
		{da, fi.EP_MSG, core.OpCompareAtomic, fi.INT32, fi.CSWAP, fi.EINVAL},
		{da, fi.EP_RDM, core.OpAtomic, fi.UINT64, fi.ATOMIC_WRITE, fi.EOPNOTSUPP},
		{dg, fi.EP_DGRAM, core.OpAtomic, fi.UINT64, fi.ATOMIC_WRITE, fi.EOPNOTSUPP},
	} {
		count, size, err := c.d.QueryAtomic(c.t, c.k, c.dt, c.op)
		switch {
		case c.want == 0 && (err != nil || count != 1 || size != 8):
			t.Errorf("%s %v kind %d %v %v: count %d size %d, %v; want 1, 8", c.d.name, c.t, c.k, c.dt, c.op, count, size, err)
		case c.want != 0 && !errors.Is(err, c.want):
			t.Errorf("%s %v kind %d %v %v: %v, want %v", c.d.name, c.t, c.k, c.dt, c.op, err, c.want)
		}
	}
}

// TestAtomicRefused: operations the device cannot do are refused at post,
// nothing sent: a count other than 1 (FI_E2BIG, as libfabric's verbs), a
// buffer that is not whole elements, an unaligned target, a datatype or
// operation it lacks, an injected fetch; the endpoint goes on.
func TestAtomicRefused(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	target := sharedMem(t, 4096)
	key := regMem(t, db, target, fi.REMOTE_WRITE).Key()
	fetch := func(op fi.AtomicOp, dt fi.AtomicType, buf, result []byte) *core.Op {
		return &core.Op{Kind: core.OpFetchAtomic, AtomicOp: op, Datatype: dt, Buf: buf, Result: result, Key: key}
	}
	for _, c := range []struct {
		name string
		op   *core.Op
		want fi.Errno
	}{
		{"two elements", &core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Datatype: fi.UINT64, Buf: make([]byte, 16), Key: key}, fi.E2BIG},
		{"no elements", &core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Datatype: fi.UINT64, Key: key}, fi.E2BIG},
		{"two results", fetch(fi.SUM, fi.UINT64, u64(1), make([]byte, 16)), fi.E2BIG},
		{"4 bytes", fetch(fi.SUM, fi.UINT64, make([]byte, 4), make([]byte, 8)), fi.EINVAL},
		{"no compare", &core.Op{Kind: core.OpCompareAtomic, AtomicOp: fi.CSWAP, Datatype: fi.UINT64, Buf: u64(1), Result: make([]byte, 8), Key: key}, fi.E2BIG},
		{"unaligned", &core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Datatype: fi.UINT64, Buf: u64(1), Addr: 4, Key: key}, fi.EINVAL},
		{"double", fetch(fi.SUM, fi.DOUBLE, u64(1), make([]byte, 8)), fi.EINVAL},
		{"min", fetch(fi.MIN, fi.UINT64, u64(1), make([]byte, 8)), fi.ENOSYS},
		{"injected fetch", &core.Op{Kind: core.OpFetchAtomic, AtomicOp: fi.SUM, Datatype: fi.UINT64, Buf: u64(1), Result: make([]byte, 8), Key: key, Flags: fi.INJECT}, fi.EINVAL},
		{"wide key", &core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Datatype: fi.UINT64, Buf: u64(1), Key: 1 << 32}, fi.EINVAL},
	} {
		if err := pr.cli.try(c.op); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	op := fetch(fi.SUM, fi.UINT64, u64(2), make([]byte, 8))
	pr.cli.post(t, op)
	if d := pr.cli.wait(t); d.c.Err != 0 || at(target, 0) != 2 {
		t.Errorf("an atomic after the refused ones: %+v, the target holds %d", d.c, at(target, 0))
	}
}

// TestAtomicBadKey: an atomic with a key the peer did not give, or on a
// region registered without FI_REMOTE_WRITE (the device's remote atomic
// access comes with it), fails as RMA does: FI_EIO with prov_errno the
// ibv status, and the connection ends. The target is unchanged.
func TestAtomicBadKey(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	for _, c := range []struct {
		name   string
		access fi.Caps
		key    func(uint64) uint64
	}{
		{"unknown key", fi.REMOTE_WRITE, func(k uint64) uint64 { return k ^ 0xff }},
		{"no remote write", fi.REMOTE_READ, func(k uint64) uint64 { return k }},
	} {
		pr := connect(t, p, da, db)
		target := sharedMem(t, 4096)
		key := regMem(t, db, target, c.access).Key()
		pr.cli.post(t, &core.Op{Kind: core.OpFetchAtomic, AtomicOp: fi.SUM, Datatype: fi.UINT64, Buf: u64(1), Result: make([]byte, 8), Key: c.key(key)})
		if d := pr.cli.wait(t); d.c.Err != fi.EIO || d.c.ProvErrno != int(ibv.WCRemAccessErr) || d.c.Flags != fi.CQFlags(fi.ATOMIC|fi.READ) {
			t.Errorf("%s: %+v, want FI_EIO with prov_errno IBV_WC_REM_ACCESS_ERR", c.name, d.c)
		}
		if f := pr.cli.ev.WaitFailed(t); !errors.Is(f.Err, fi.EIO) {
			t.Errorf("%s: connection %v, want FI_EIO", c.name, f.Err)
		}
		if at(target, 0) != 0 {
			t.Errorf("%s: the target changed to %d", c.name, at(target, 0))
		}
	}
}

// TestAtomicsLossy: with the fabric dropping, duplicating and reordering
// packets, fetch-and-adds of 1 on one element each execute exactly once:
// an atomic whose ACK was lost is sent again and answered from the
// original value the target saved, not executed again. The results are
// 0 to n-1, each once, and the target ends at n; the target's device
// took duplicates of executed requests (the retries happened); the
// target's events report n remote atomics (FI_RMA_EVENT counts each once).
func TestAtomicsLossy(t *testing.T) {
	shortTimers(t)
	p, da, db := twoDevices(t, &ibv.Fault{Drop: 0.2, Duplicate: 0.1, Reorder: 0.1, Seed: 11})
	pr := connect(t, p, da, db)
	target := sharedMem(t, 4096)
	key := regMem(t, db, target, fi.REMOTE_WRITE).Key()
	before := db.dev.dev.Stats().Duplicates
	const n = 300
	// The target's events, taken as they come: one per atomic executed.
	events := make(chan int)
	go func() {
		k := 0
		for {
			select {
			case <-pr.srv.ev.RemoteCh:
				k++
			case <-time.After(500 * time.Millisecond):
				events <- k
				return
			}
		}
	}()
	seen := make([]bool, n)
	for i := range n {
		op := &core.Op{Kind: core.OpFetchAtomic, AtomicOp: fi.SUM, Datatype: fi.UINT64, Buf: u64(1), Result: make([]byte, 8), Addr: 64, Key: key}
		pr.cli.post(t, op)
		d := pr.cli.wait(t)
		if d.c.Err != 0 {
			t.Fatalf("atomic %d: %+v", i, d.c)
		}
		r := at(op.Result, 0)
		if r >= n || seen[r] {
			t.Fatalf("atomic %d returned %d: executed more than once", i, r)
		}
		seen[r] = true
	}
	if v := at(target, 64); v != n {
		t.Errorf("the target holds %d after %d fetch-and-adds of 1", v, n)
	}
	if dup := db.dev.dev.Stats().Duplicates - before; dup == 0 {
		t.Error("the target's device took no duplicate request: no retry was tested")
	}
	if k := <-events; k != n {
		t.Errorf("the target reported %d remote atomics, want %d", k, n)
	}
}

// remoteEvent is the next remote completion of s, failing the test if
// none comes.
func remoteEvent(t *testing.T, s side) core.Completion {
	t.Helper()
	select {
	case c := <-s.ev.RemoteCh:
		return c
	case <-time.After(waitTime):
		t.Fatal("no remote event")
	}
	return core.Completion{}
}

// noRemoteEvent fails the test if s has a remote completion.
func noRemoteEvent(t *testing.T, s side, what string) {
	t.Helper()
	select {
	case c := <-s.ev.RemoteCh:
		t.Errorf("%s: remote event %+v", what, c)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestRemoteEvents: FI_RMA_EVENT. The target endpoint's events report
// each RMA and atomic its peer made on its memory once done, which core
// counts on the counters bound with fi_ep_bind (fi_endpoint(3)):
// "FI_REMOTE_READ Increments the specified counter whenever an RMA read,
// atomic fetch, or atomic compare operation is initiated from a remote
// endpoint that targets the given endpoint." "FI_REMOTE_WRITE Increments
// the specified counter whenever an RMA write or base atomic operation is
// initiated from a remote endpoint that targets the given endpoint." A
// write with remote CQ data is reported by the receive it completes; a
// zero-length write (the keepalive) not at all.
func TestRemoteEvents(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	if in := infoOf(t, p, da.name, fi.EP_MSG); in.Caps&fi.RMA_EVENT == 0 || in.RxAttr.Caps&fi.RMA_EVENT == 0 {
		t.Errorf("the FI_EP_MSG entry's caps %v, rx caps %v lack FI_RMA_EVENT", in.Caps, in.RxAttr.Caps)
	}
	pr := connect(t, p, da, db)
	target := sharedMem(t, 1<<16)
	key := regMem(t, db, target, fi.REMOTE_READ|fi.REMOTE_WRITE).Key()
	rmaWrite, rmaRead := fi.CQFlags(fi.RMA|fi.REMOTE_WRITE), fi.CQFlags(fi.RMA|fi.REMOTE_READ)
	atomicRead := fi.CQFlags(fi.ATOMIC | fi.REMOTE_READ)
	for _, c := range []struct {
		name  string
		op    *core.Op
		flags fi.CQFlags
		n     uint64
	}{
		{"write", &core.Op{Kind: core.OpWrite, Buf: make([]byte, 3000)}, rmaWrite, 3000},
		{"read", &core.Op{Kind: core.OpRead, Buf: make([]byte, 5000)}, rmaRead, 5000},
		{"zero-length read", &core.Op{Kind: core.OpRead}, rmaRead, 0},
		{"FI_ATOMIC_WRITE", &core.Op{Kind: core.OpAtomic, AtomicOp: fi.ATOMIC_WRITE, Datatype: fi.UINT64, Buf: u64(1)}, rmaWrite, 8},
		{"FI_ATOMIC_READ", &core.Op{Kind: core.OpFetchAtomic, AtomicOp: fi.ATOMIC_READ, Datatype: fi.UINT64, Result: make([]byte, 8)}, atomicRead, 8},
		{"FI_SUM", &core.Op{Kind: core.OpFetchAtomic, AtomicOp: fi.SUM, Datatype: fi.INT64, Buf: u64(1), Result: make([]byte, 8)}, atomicRead, 8},
		{"FI_CSWAP", &core.Op{Kind: core.OpCompareAtomic, AtomicOp: fi.CSWAP, Datatype: fi.INT64, Buf: u64(1), Compare: u64(2), Result: make([]byte, 8)}, atomicRead, 8},
	} {
		c.op.Key, c.op.Addr = key, 4096
		pr.cli.post(t, c.op)
		if d := pr.cli.wait(t); d.c.Err != 0 {
			t.Fatalf("%s: %+v", c.name, d.c)
		}
		if e := remoteEvent(t, pr.srv); e.Flags != c.flags || e.Len != c.n || e.Err != 0 {
			t.Errorf("%s: remote event %+v, want flags %v, len %d", c.name, e, c.flags, c.n)
		}
		noRemoteEvent(t, pr.srv, c.name+" (a second event)")
		noRemoteEvent(t, pr.cli, c.name+" (at the initiator)")
	}
	pr.cli.post(t, &core.Op{Kind: core.OpWrite, Key: key})
	pr.cli.wait(t)
	noRemoteEvent(t, pr.srv, "zero-length write")
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	pr.cli.post(t, &core.Op{Kind: core.OpWrite, Buf: make([]byte, 10), Key: key, Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: 7})
	pr.cli.wait(t)
	if d := pr.srv.wait(t); d.c.Flags != fi.CQFlags(fi.RMA|fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA) {
		t.Errorf("writedata's receive %+v", d.c)
	}
	noRemoteEvent(t, pr.srv, "writedata (reported by its receive)")
}
