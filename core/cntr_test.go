package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// links renders an object's bindings as "name->kind/id" words.
func links(o *core.Object) string {
	var s []string
	for _, l := range o.Impl.(core.Linker).Links() {
		s = append(s, l.Name+"->"+l.Target.Path())
	}
	return strings.Join(s, " ")
}

func TestBindCntr(t *testing.T) {
	d := lo(t)
	ep := create(t, d, core.KindEP, "a")
	c := create(t, d, core.KindCntr, "c")
	create(t, d, core.KindCntr, "x")
	for _, tt := range []struct {
		cmd  string
		code fi.Errno
	}{
		{"bind cntr c", fi.EINVAL},
		{"bind cntr nosuch send", fi.ENOENT},
		{"bind cntr c selective", fi.EINVAL},
		{"bind cntr c send,tagged", fi.EINVAL},
		{"bind cntr c ,", fi.EINVAL},
	} {
		wantCode(t, tt.cmd, ep.Ctl(context.Background(), 0, tt.cmd), tt.code)
	}
	run(t, ep, "bind cntr c FI_SEND|recv")
	run(t, ep, "bind cntr x read,WRITE,remote_read,fi_remote_write")
	// One counter per class, as libfabric: the second is EINVAL and binds
	// nothing, not even its free classes.
	wantCode(t, "second counter for send", ep.Ctl(context.Background(), 0, "bind cntr x transmit"), fi.EINVAL)
	wantCode(t, "second counter for write", ep.Ctl(context.Background(), 0, "bind cntr c write"), fi.EINVAL)
	want := "cntr_send->cntr/c cntr_recv->cntr/c cntr_read->cntr/x cntr_write->cntr/x cntr_remote_read->cntr/x cntr_remote_write->cntr/x"
	if got := links(ep); got != want {
		t.Errorf("links %q, want %q", got, want)
	}
	if st := ep.Status().String(); !strings.Contains(st, " cntr=send:c,recv:c,read:x,write:x,remote_read:x,remote_write:x ") {
		t.Errorf("status %q does not show the counters", st)
	}
	if st := c.Status().String(); st != "cntr c value=0 errors=0 bound=2" {
		t.Errorf("cntr status %q", st)
	}
	wantCode(t, "Remove of a bound cntr", c.Remove(), fi.EBUSY)
	if err := ep.Remove(); err != nil {
		t.Fatal(err)
	}
	if st := c.Status().String(); st != "cntr c value=0 errors=0 bound=0" {
		t.Errorf("cntr status after its endpoint closed: %q", st)
	}
	if err := c.Remove(); err != nil {
		t.Errorf("Remove of a cntr whose endpoint closed: %v", err)
	}
}

// waitFor runs "wait ARGS" on a counter in the background; the result
// arrives on the channel. It checks the waiter is still blocked after
// 50ms, so that what follows has to wake it.
func waitFor(t *testing.T, o *core.Object, args string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- o.Ctl(context.Background(), 0, "wait "+args) }()
	select {
	case err := <-done:
		t.Fatalf("wait %s returned early: %v", args, err)
	case <-time.After(50 * time.Millisecond):
	}
	return done
}

// TestCntrCountsCompletions: counters bound to both endpoints of a pair
// count every send and receive of the data files, including those a
// selective CQ binding keeps out of the CQ, count a failed receive as an
// error, and wake waiters.
func TestCntrCountsCompletions(t *testing.T) {
	d := lo(t)
	sent := create(t, d, core.KindCntr, "sent")
	recvd := create(t, d, core.KindCntr, "recvd")
	a, b, pep, _, cq := pair(t, d, "bind cq c send,recv,selective", "bind cntr sent send", "bind cntr recvd recv")
	ctx := context.Background()
	epA, epB := a.Impl.(*core.EP), b.Impl.(*core.EP)
	sc, rc := sent.Impl.(*core.Cntr), recvd.Impl.(*core.Cntr)

	waiter := waitFor(t, recvd, "1 10000")
	if err := epA.WriteData(ctx, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if sc.Value() != 1 {
		t.Errorf("send counter after a send: %d, want 1", sc.Value())
	}
	if n, err := epB.ReadData(ctx, rbufOf(8), 0); err != nil || n != 3 {
		t.Fatalf("read: %d, %v", n, err)
	}
	if err := <-waiter; err != nil {
		t.Errorf("waiter on the receive counter: %v", err)
	}
	if rc.Value() != 1 || rc.Errors() != 0 {
		t.Errorf("receive counter %d errors %d, want 1 and 0", rc.Value(), rc.Errors())
	}
	// The data files ask for no completion entries; the binding is
	// selective, so the CQ holds nothing though both counters counted.
	if es, err := cq.Read(ctx, 10, false); !errors.Is(err, fi.EAGAIN) {
		t.Errorf("selective CQ holds %v, %v; want nothing", es, err)
	}

	// A read interrupted before anything arrives withdraws its receive:
	// nothing reaches the CQ or the counters, and a waiter sleeps on.
	waiter = waitFor(t, recvd, "2 10000")
	ictx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := epA.ReadData(ictx, rbufOf(8), 0)
	cancel()
	wantCode(t, "interrupted read", err, fi.EINTR)
	if es, err := cq.Read(ctx, 10, false); !errors.Is(err, fi.EAGAIN) {
		t.Errorf("CQ after an interrupted read: %v, %v; want nothing", es, err)
	}
	if rc.Value() != 1 || rc.Errors() != 0 {
		t.Errorf("receive counter %d errors %d after an interrupted read, want 1 and 0", rc.Value(), rc.Errors())
	}

	// A receive that fails (a message longer than rxbuf: FI_ETRUNC) is an
	// error completion: it reaches the CQ and the counter's error count,
	// and wakes the waiter with FI_EAVAIL.
	run(t, a, "rxbuf 2")
	go epB.WriteData(ctx, []byte("long"))
	if n, err := epA.ReadData(ctx, rbufOf(8), 0); err != nil || n != 2 {
		t.Errorf("read of a truncated message: %d, %v; want its first 2 bytes", n, err)
	}
	wantCode(t, "read after a truncated message", func() error { _, err := epA.ReadData(ctx, rbufOf(8), 0); return err }(), fi.ETRUNC)
	wantCode(t, "waiter when the error count rose", <-waiter, fi.EAVAIL)
	if rc.Value() != 1 || rc.Errors() != 1 {
		t.Errorf("receive counter %d errors %d, want 1 and 1", rc.Value(), rc.Errors())
	}
	es, err := cq.Read(ctx, 10, false)
	if err != nil || len(es) != 1 || es[0].Err != fi.ETRUNC || es[0].Flags != fi.CQFlags(fi.MSG|fi.RECV) {
		t.Errorf("CQ after a truncated receive: %v, %v", es, err)
	}
	run(t, a, "rxbuf off")

	// Messages both ways: each endpoint's counters count its own.
	go epB.WriteData(ctx, []byte("two"))
	if _, err := epA.ReadData(ctx, rbufOf(8), 0); err != nil {
		t.Fatal(err)
	}
	if err := recvd.Ctl(ctx, 0, "wait 2 10000"); err != nil {
		t.Error(err)
	}
	if err := sent.Ctl(ctx, 0, "wait 2 10000"); err != nil {
		t.Error(err)
	}

	wantCode(t, "bind after enable", a.Ctl(ctx, 0, "bind cntr sent write"), fi.EOPBADSTATE)
	wantCode(t, "Remove of a bound cntr", sent.Remove(), fi.EBUSY)
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Remove of a cntr b still holds", sent.Remove(), fi.EBUSY)
	if err := pep.Remove(); err != nil { // b goes with its pep
		t.Fatal(err)
	}
	for _, o := range []*core.Object{sent, recvd} {
		if err := o.Remove(); err != nil {
			t.Errorf("Remove of %s after its endpoints closed: %v", o, err)
		}
	}
}

// TestCntrWaitWakes: every kind of update wakes a waiter, and many
// concurrent updates lose no count.
func TestCntrWaitWakes(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindCntr, "n")
	w := waitFor(t, o, "5 10000")
	run(t, o, "set 5")
	if err := <-w; err != nil {
		t.Errorf("waiter after set: %v", err)
	}
	w = waitFor(t, o, "6 10000")
	run(t, o, "adderr 1")
	wantCode(t, "waiter after adderr", <-w, fi.EAVAIL)
	w = waitFor(t, o, "6 10000")
	if err := o.Remove(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "waiter when the counter closes", <-w, fi.ESHUTDOWN)

	// Waiters and adders race; every add counts and every waiter returns.
	c := create(t, d, core.KindCntr, "m").Impl.(*core.Cntr)
	const adders, adds = 8, 1000
	waiters := make(chan error, adders)
	for i := 0; i < adders; i++ {
		go func(i int) { waiters <- c.Wait(context.Background(), uint64(i+1)*adds, 10*time.Second) }(i)
		go func() {
			for j := 0; j < adds; j++ {
				c.Add(1)
			}
		}()
	}
	for i := 0; i < adders; i++ {
		if err := <-waiters; err != nil {
			t.Errorf("waiter: %v", err)
		}
	}
	if c.Value() != adders*adds {
		t.Errorf("value %d after %d adds", c.Value(), adders*adds)
	}
}
