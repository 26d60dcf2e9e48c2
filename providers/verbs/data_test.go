package verbs

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// TestSendRecv: messages of every size class go both ways, from and into
// buffers registered with the domain (Op.Mem) and buffers registered for
// the operation alone.
func TestSendRecv(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	const max = 1 << 20
	memA, memB := make([]byte, 2*max), make([]byte, 2*max)
	ra := regMem(t, da, memA, 0)
	rb := regMem(t, db, memB, 0)
	for i, n := range []int{0, 1, 4096, 4097, 100000, max} {
		for _, registered := range []bool{false, true} {
			for _, dir := range []struct {
				from, to side
				fm, tm   []byte
				fr, tr   core.Memory
			}{{pr.cli, pr.srv, memA, memB, ra, rb}, {pr.srv, pr.cli, memB, memA, rb, ra}} {
				msg := pattern(n, i)
				send := &core.Op{Kind: core.OpSend, Buf: msg}
				recv := &core.Op{Kind: core.OpRecv, Buf: make([]byte, n+10)}
				if registered {
					copy(dir.fm[max/2:], msg)
					send.Buf, send.Mem, send.MemOff = dir.fm[max/2:][:n], dir.fr, max/2
					recv.Buf, recv.Mem, recv.MemOff = dir.tm[3:][:n+10], dir.tr, 3
				}
				dir.to.post(t, recv)
				dir.from.post(t, send)
				if d := dir.from.wait(t); d.c.Err != 0 || d.c.Len != uint64(n) || d.c.Flags != fi.CQFlags(fi.MSG|fi.SEND) {
					t.Fatalf("%d bytes: send completion %+v", n, d.c)
				}
				d := dir.to.wait(t)
				if d.c.Err != 0 || d.c.Len != uint64(n) || d.c.Flags != fi.CQFlags(fi.MSG|fi.RECV) {
					t.Fatalf("%d bytes: receive completion %+v", n, d.c)
				}
				if !bytes.Equal(d.op.Buf[:n], msg) {
					t.Fatalf("%d bytes (registered %v): received bytes differ", n, registered)
				}
			}
		}
	}
}

// TestRemoteCQData: a send with remote CQ data is a send with immediate:
// the receive reports FI_REMOTE_CQ_DATA and the 4 bytes; wider data is
// refused.
func TestRemoteCQData(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 64)})
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("hi"), Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: 0xfeedf00d})
	pr.cli.wait(t)
	d := pr.srv.wait(t)
	if d.c.Flags != fi.CQFlags(fi.MSG|fi.RECV|fi.REMOTE_CQ_DATA) || d.c.Data != 0xfeedf00d || d.c.Len != 2 {
		t.Errorf("receive %+v, want FI_REMOTE_CQ_DATA 0xfeedf00d", d.c)
	}
	err := pr.cli.try(&core.Op{Kind: core.OpSend, Buf: []byte("hi"), Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: 1 << 32})
	if !errors.Is(err, fi.EINVAL) {
		t.Errorf("send with 5 bytes of CQ data = %v, want FI_EINVAL", err)
	}
}

// TestInject: an injected payload is copied at post (the buffer may
// change at once); a longer one than inject_size is refused.
func TestInject(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	size := int(infoOf(t, p, da.name, fi.EP_MSG).TxAttr.InjectSize)
	buf := pattern(size, 5)
	msg := bytes.Clone(buf)
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, size)})
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: buf, Flags: fi.INJECT})
	clear(buf)
	pr.cli.wait(t)
	if d := pr.srv.wait(t); !bytes.Equal(d.op.Buf[:d.c.Len], msg) {
		t.Error("the injected message changed with its buffer")
	}
	if err := pr.cli.try(&core.Op{Kind: core.OpSend, Buf: make([]byte, size+1), Flags: fi.INJECT}); !errors.Is(err, fi.EINVAL) {
		t.Errorf("inject of inject_size+1 bytes = %v, want FI_EINVAL", err)
	}
}

// TestTruncation: a message longer than its receive fills it and
// completes with FI_ETRUNC and the bytes that did not fit; the connection
// goes on.
func TestTruncation(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	msg := pattern(100, 8)
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 10)})
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: msg})
	if d := pr.cli.wait(t); d.c.Err != 0 {
		t.Fatalf("send: %v", d.c.Err)
	}
	d := pr.srv.wait(t)
	if d.c.Err != fi.ETRUNC || d.c.Len != 10 || d.c.OLen != 90 || !bytes.Equal(d.op.Buf, msg[:10]) {
		t.Errorf("truncated receive %+v holding %x", d.c, d.op.Buf)
	}
	msg = pattern(50, 9)
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 50)})
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: msg})
	pr.cli.wait(t)
	if d := pr.srv.wait(t); d.c.Err != 0 || !bytes.Equal(d.op.Buf, msg) {
		t.Errorf("the next receive: %+v", d.c)
	}
}

// TestRecvWithoutBuffer: a receive posted without a buffer gets the whole
// message in one made for it.
func TestRecvWithoutBuffer(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	for _, n := range []int{0, 33, 300000} {
		msg := pattern(n, n)
		pr.srv.post(t, &core.Op{Kind: core.OpRecv})
		pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: msg})
		pr.cli.wait(t)
		d := pr.srv.wait(t)
		if d.c.Err != 0 || d.c.Len != uint64(n) || !bytes.Equal(d.op.Buf, msg) {
			t.Errorf("%d bytes: %+v, %d bytes in the buffer", n, d.c, len(d.op.Buf))
		}
	}
}

// TestRMA: writes and reads of the peer's registered memory by key, at
// offsets into it; a write with remote CQ data takes a receive and
// completes it with FI_RMA|FI_REMOTE_WRITE|FI_REMOTE_CQ_DATA, as
// libfabric's verbs does.
func TestRMA(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	target := sharedMem(t, 1<<16)
	key := regMem(t, db, target, fi.REMOTE_READ|fi.REMOTE_WRITE).Key()
	data := pattern(3000, 19)
	pr.cli.post(t, &core.Op{Kind: core.OpWrite, Buf: data, Addr: 100, Key: key})
	if d := pr.cli.wait(t); d.c.Err != 0 || d.c.Flags != fi.CQFlags(fi.RMA|fi.WRITE) || d.c.Len != 3000 {
		t.Fatalf("write: %+v", d.c)
	}
	if !bytes.Equal(target[100:3100], data) {
		t.Error("the target does not hold the written bytes")
	}
	pr.srv.quiet(t, 20*time.Millisecond)

	copy(target[2000:], pattern(5000, 21))
	got := make([]byte, 5000)
	pr.cli.post(t, &core.Op{Kind: core.OpRead, Buf: got, Addr: 2000, Key: key})
	if d := pr.cli.wait(t); d.c.Err != 0 || d.c.Flags != fi.CQFlags(fi.RMA|fi.READ) || d.c.Len != 5000 {
		t.Fatalf("read: %+v", d.c)
	}
	if !bytes.Equal(got, target[2000:7000]) {
		t.Error("the bytes read differ")
	}

	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	data = pattern(500, 20)
	pr.cli.post(t, &core.Op{Kind: core.OpWrite, Buf: data, Addr: 4000, Key: key, Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: 0xabcdef})
	pr.cli.wait(t)
	d := pr.srv.wait(t)
	if d.c.Err != 0 || d.c.Flags != fi.CQFlags(fi.RMA|fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA) || d.c.Len != 500 || d.c.Data != 0xabcdef {
		t.Errorf("the receive taken by writedata: %+v", d.c)
	}
	if !bytes.Equal(target[4000:4500], data) {
		t.Error("the target does not hold the bytes of writedata")
	}
}

// TestBadKey: RMA with a key the peer did not give, or beyond the region,
// fails with FI_EIO (prov_errno the ibv status) and ends the connection:
// the QP is in error, as with libfabric's verbs. The target's device
// charges the bad key to the peer at that port (probe.go); each case
// connects to a new listener.
func TestBadKey(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	for _, c := range []struct {
		name      string
		addr, key func(uint64) uint64
		access    fi.Caps
	}{
		{"unknown key", func(uint64) uint64 { return 0 }, func(k uint64) uint64 { return k ^ 0xff }, fi.REMOTE_WRITE},
		{"out of range", func(uint64) uint64 { return 4000 }, func(k uint64) uint64 { return k }, fi.REMOTE_WRITE},
		{"no remote write", func(uint64) uint64 { return 0 }, func(k uint64) uint64 { return k }, fi.REMOTE_READ},
	} {
		pr := connect(t, p, da, db)
		key := regMem(t, db, make([]byte, 4096), c.access).Key()
		pr.cli.post(t, &core.Op{Kind: core.OpWrite, Buf: make([]byte, 200), Addr: c.addr(key), Key: c.key(key)})
		d := pr.cli.wait(t)
		if d.c.Err != fi.EIO || d.c.ProvErrno != int(ibv.WCRemAccessErr) {
			t.Errorf("%s: write %+v, want FI_EIO with prov_errno IBV_WC_REM_ACCESS_ERR", c.name, d.c)
		}
		if f := pr.cli.ev.WaitFailed(t); !errors.Is(f.Err, fi.EIO) {
			t.Errorf("%s: connection %v, want FI_EIO", c.name, f.Err)
		}
		select {
		case <-pr.srv.ev.ShutdownCh:
		case <-pr.srv.ev.FailedCh:
		case <-time.After(waitTime):
			t.Errorf("%s: the target's connection did not end", c.name)
		}
		name, err := pr.srv.ep.Name()
		if err != nil {
			t.Fatal(err)
		}
		db.dev.probers.mu.Lock()
		b := db.dev.probers.m[probed{da.dev.ip, name.IP.Port(), false}]
		db.dev.probers.mu.Unlock()
		if b == nil || b.tokens != probeBurst-1 {
			t.Errorf("%s: the bad key was not charged to the peer at port %d: %+v", c.name, name.IP.Port(), b)
		}
	}
}

// TestCancel: nothing posted to a QP can be taken back; the receive
// completes with its message later.
func TestCancel(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	op := &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)}
	pr.srv.post(t, op)
	if pr.srv.ep.Cancel(op) {
		t.Fatal("Cancel of a posted receive succeeded")
	}
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("late")})
	pr.cli.wait(t)
	if d := pr.srv.wait(t); d.c.Err != 0 || string(d.op.Buf[:d.c.Len]) != "late" {
		t.Errorf("receive after a refused cancel: %+v", d.c)
	}
}

// TestLimits: sends need a connection; queues hold tx_size and rx_size
// operations (FI_EAGAIN beyond); FI_MULTI_RECV is refused.
func TestLimits(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	info := infoOf(t, p, da.name, fi.EP_MSG)
	info.RxAttr.Size = 4
	idle := newSide(t, da, info, nil)
	if err := idle.try(&core.Op{Kind: core.OpSend, Buf: []byte("x")}); !errors.Is(err, fi.ENOTCONN) {
		t.Errorf("send before connecting = %v, want FI_ENOTCONN", err)
	}
	for range 4 {
		idle.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	}
	if err := idle.try(&core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)}); !errors.Is(err, fi.EAGAIN) {
		t.Errorf("receive beyond rx_size = %v, want FI_EAGAIN", err)
	}
	if err := idle.try(&core.Op{Kind: core.OpRecv, Flags: fi.OpFlags(fi.MULTI_RECV), Buf: make([]byte, 8)}); !errors.Is(err, fi.EOPNOTSUPP) {
		t.Errorf("FI_MULTI_RECV receive = %v, want FI_EOPNOTSUPP", err)
	}
	info.RxAttr.Size = 1 << 20
	if _, err := da.NewEndpoint(info, nil, provtest.NewEPEvents()); !errors.Is(err, fi.EINVAL) {
		t.Errorf("rx_size 2^20 = %v, want FI_EINVAL", err)
	}
	_ = db
}

// TestPoller: while an engine polls the endpoint, completions wait for
// its Poll; Park hands them back to the notifications.
func TestPoller(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	pr := connect(t, p, da, db)
	poller := pr.srv.ep.(core.Poller)
	poller.Poll()
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("polled")})
	pr.cli.wait(t)
	pr.srv.quiet(t, 50*time.Millisecond)
	deadline := time.Now().Add(waitTime)
	for !poller.Poll() {
		if time.Now().After(deadline) {
			t.Fatal("Poll found nothing")
		}
	}
	if d := pr.srv.wait(t); string(d.op.Buf[:d.c.Len]) != "polled" {
		t.Errorf("received %q", d.op.Buf[:d.c.Len])
	}
	poller.Park()
	pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("parked")})
	if d := pr.srv.wait(t); string(d.op.Buf[:d.c.Len]) != "parked" {
		t.Errorf("received %q", d.op.Buf[:d.c.Len])
	}
}

// TestOwnersApart: a peer of one user's endpoint reaches that user's
// memory by key, and not another user's, though both are in the domain:
// each user has a protection domain of its own.
func TestOwnersApart(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	cli := connectAs(t, 1000, p, da, db).cli
	mine := sharedMem(t, 4096)
	theirs := sharedMem(t, 4096)
	mineKey := regMemOf(t, 1000, db, mine, fi.REMOTE_WRITE).Key()
	theirKey := regMemOf(t, 2000, db, theirs, fi.REMOTE_WRITE).Key()
	cli.post(t, &core.Op{Kind: core.OpWrite, Buf: []byte("mine"), Key: mineKey})
	if d := cli.wait(t); d.c.Err != 0 || string(mine[:4]) != "mine" {
		t.Fatalf("write to the endpoint owner's memory: %+v", d.c)
	}
	cli.post(t, &core.Op{Kind: core.OpWrite, Buf: []byte("evil"), Key: theirKey})
	if d := cli.wait(t); d.c.Err != fi.EIO || d.c.ProvErrno != int(ibv.WCRemAccessErr) {
		t.Errorf("write to another owner's memory: %+v, want FI_EIO, IBV_WC_REM_ACCESS_ERR", d.c)
	}
	if string(theirs[:4]) == "evil" {
		t.Error("another owner's memory was written")
	}
}

// TestBadKeyBurst: the device refuses a peer's connections after bad keys
// only once probeBurst of them came at once, whichever side presented
// them: one bad key (a mistake, or another user of the peer's host) does
// not lock the peer out of a port. The requests of an endpoint that
// connected count too: when the listener's side presents the bad keys,
// the connecting device refuses to connect to that listener.
func TestBadKeyBurst(t *testing.T) {
	for _, srvProbes := range []bool{false, true} {
		p, da, db := twoDevices(t, nil)
		_, pev, addr := listen(t, p, db)
		// connectTo connects an endpoint of da to addr; nil if refused.
		connectTo := func() *pair {
			cli := newSide(t, da, infoOf(t, p, da.name, fi.EP_MSG), nil)
			if err := cli.ep.Connect(addr, nil); err != nil {
				if !errors.Is(err, fi.ECONNREFUSED) {
					t.Fatalf("Connect: %v, want success or FI_ECONNREFUSED", err)
				}
				return nil
			}
			select {
			case req := <-pev.Reqs:
				srv := newSide(t, db, req.Info(), req)
				if err := srv.ep.Accept(nil); err != nil {
					t.Fatalf("Accept: %v", err)
				}
				cli.ev.WaitConnected(t)
				srv.ev.WaitConnected(t)
				return &pair{cli, srv}
			case f := <-cli.ev.FailedCh:
				if !errors.Is(f.Err, fi.ECONNREFUSED) {
					t.Fatalf("connection %v, want FI_ECONNREFUSED", f.Err)
				}
				return nil
			case <-time.After(waitTime):
				t.Fatal("no request and no refusal")
				return nil
			}
		}
		for i := 0; i < probeBurst; i++ {
			pr := connectTo()
			if pr == nil {
				t.Fatalf("server probes %v: refused after %d bad keys; the burst is %d", srvProbes, i, probeBurst)
			}
			prober, target, targetDom := pr.cli, pr.srv, db
			if srvProbes {
				prober, target, targetDom = pr.srv, pr.cli, da
			}
			key := regMem(t, targetDom, make([]byte, 4096), fi.REMOTE_WRITE).Key()
			prober.post(t, &core.Op{Kind: core.OpWrite, Buf: make([]byte, 8), Key: key ^ 0xff})
			if d := prober.wait(t); d.c.Err != fi.EIO {
				t.Fatalf("bad key %d: %+v, want FI_EIO", i, d.c)
			}
			target.ev.WaitShutdownOrFailed(t)
		}
		if pr := connectTo(); pr != nil {
			t.Errorf("server probes %v: a connection after %d bad keys at once was taken", srvProbes, probeBurst)
		}
	}
}
