package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// lo opens a fabric over the real tcp provider and returns its lo domain.
func lo(t testing.TB) *core.Domain {
	t.Helper()
	p, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	return loOf(t, p)
}

// loOf opens a fabric over p, the tcp provider or one wrapping it, and
// returns its tcp/lo domain.
func loOf(t testing.TB, p core.Provider) *core.Domain {
	t.Helper()
	_, d := fabricOf(t, p)
	return d
}

// loFabric opens a fabric over the real tcp provider and returns it with
// its tcp/lo domain.
func loFabric(t testing.TB) (*core.Fabric, *core.Domain) {
	t.Helper()
	p, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	return fabricOf(t, p)
}

// fabricOf opens a fabric over p and returns it with its tcp/lo domain;
// the test's cleanup closes it.
func fabricOf(t testing.TB, p core.Provider) (*core.Fabric, *core.Domain) {
	t.Helper()
	f, err := core.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	d, ok := f.Domain("tcp", "lo")
	if !ok {
		t.Fatal("no tcp/lo domain")
	}
	return f, d
}

func newTCP() (core.Provider, error) { return tcp.New(tcp.Config{}) }

func create(t testing.TB, d *core.Domain, k core.Kind, name string) *core.Object {
	t.Helper()
	o, err := d.Create(k, name, 0)
	if err != nil {
		t.Fatalf("Create(%s, %q): %v", k, name, err)
	}
	return o
}

func run(t testing.TB, o *core.Object, cmd string) {
	t.Helper()
	if err := o.Ctl(context.Background(), 0, cmd); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
}

func present(d *core.Domain, k core.Kind, id string) bool {
	_, ok := d.Lookup(k, id)
	return ok
}

func wantCode(t *testing.T, what string, err error, code fi.Errno) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Errorf("%s = %v, want %s", what, err, code.Name())
	}
}

func TestCloneLivesWhileOpen(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindCQ, "")
	if o.ID != "0" || !present(d, core.KindCQ, "0") {
		t.Fatalf("clone cq id %q, present %v", o.ID, present(d, core.KindCQ, "0"))
	}
	if err := o.Open(); err != nil { // a second open file
		t.Fatal(err)
	}
	o.Release()
	if !present(d, core.KindCQ, "0") {
		t.Fatal("cq went away while its creator's file is open")
	}
	wantCode(t, "Remove of a clone object", o.Remove(), fi.EBUSY)
	o.Release()
	if present(d, core.KindCQ, "0") {
		t.Fatal("cq survived its last file")
	}
	wantCode(t, "Open after death", o.Open(), fi.ENOENT)
	if n := create(t, d, core.KindCQ, ""); n.ID != "1" {
		t.Errorf("next clone id %q, want 1 (ids are not reused)", n.ID)
	}
}

func TestMkdirLivesUntilRemove(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindEQ, "events")
	if err := o.Open(); err != nil {
		t.Fatal(err)
	}
	o.Release()
	if !present(d, core.KindEQ, "events") {
		t.Fatal("mkdir'd eq died when a file closed")
	}
	_, err := d.Create(core.KindEQ, "events", 0)
	wantCode(t, "duplicate mkdir", err, fi.EEXIST)
	for _, bad := range []string{"12", "a/b", "clone", ".x", strings.Repeat("n", 65), "sp ace"} {
		_, err := d.Create(core.KindEQ, bad, 0)
		wantCode(t, "mkdir "+bad, err, fi.EINVAL)
	}
	if err := o.Remove(); err != nil {
		t.Fatal(err)
	}
	if present(d, core.KindEQ, "events") {
		t.Fatal("eq survived rmdir")
	}
}

func TestBoundObjectsAreBusy(t *testing.T) {
	d := lo(t)
	ep := create(t, d, core.KindEP, "a")
	cq := create(t, d, core.KindCQ, "") // clone: its file is the only reference
	eq := create(t, d, core.KindEQ, "e")
	run(t, ep, "bind cq "+cq.ID+" send,recv")
	run(t, ep, "bind eq e")
	cq.Release() // the creator closes its file; the binding holds the cq
	if !present(d, core.KindCQ, cq.ID) {
		t.Fatal("bound clone cq died when its file closed")
	}
	wantCode(t, "Remove of a bound eq", eq.Remove(), fi.EBUSY)
	if err := ep.Remove(); err != nil {
		t.Fatal(err)
	}
	if present(d, core.KindCQ, cq.ID) {
		t.Error("clone cq outlived the endpoint that held it")
	}
	if err := eq.Remove(); err != nil {
		t.Errorf("Remove of an unbound eq: %v", err)
	}
}

func TestLimitsAndOwners(t *testing.T) {
	f, d := loFabric(t)
	f.SetLimit(core.Objects, 2)
	for i := 0; i < 2; i++ {
		if _, err := d.Create(core.KindCntr, "", 1000); err != nil {
			t.Fatal(err)
		}
	}
	_, err := d.Create(core.KindCntr, "", 1000)
	wantCode(t, "third object of uid 1000", err, fi.ENOSPC)
	if _, err := d.Create(core.KindCntr, "", 0); err != nil {
		t.Errorf("root is not limited: %v", err)
	}
	ep, _ := d.Create(core.KindEP, "", 1001)
	wantCode(t, "bind to another user's cntr", ep.Ctl(context.Background(), 1001, "bind eq 0"), fi.ENOENT)
	eq, _ := d.Create(core.KindEQ, "", 0)
	wantCode(t, "bind to root's eq", ep.Ctl(context.Background(), 1001, "bind eq "+eq.ID), fi.EACCES)
}

// TestCtlErrorSentences checks what a failed command says. Ctl's error
// says why, not which command (fs names it, in front), and a command's
// failure is not an asynchronous error: Ctl leaves err to its caller.
func TestCtlErrorSentences(t *testing.T) {
	d := lo(t)
	ep := create(t, d, core.KindEP, "x")
	for _, tt := range []struct {
		cmd  string
		code fi.Errno
		want string
	}{
		{"bind cq 7 send", fi.ENOENT, "no such cq in domain lo"},
		{"bind cq", fi.EINVAL, "wrong number of arguments; usage: bind cq ID FLAGS"},
		{"bind", fi.EINVAL, "wrong number of arguments; usage: bind cq ID FLAGS | bind cntr ID FLAGS | bind eq ID | bind av ID"},
		{"bind mr 1", fi.EINVAL, "unknown command; usage: bind cq ID FLAGS | bind cntr ID FLAGS"},
		{"frob", fi.EINVAL, "unknown command; commands: bind, enable, connect"},
		{"connect 127.0.0.1:1", fi.ENOEQ, "no eq bound"}, // connect enables: an EQ is needed first
		{"enable", fi.ENOEQ, "no eq bound"},
		{"accept", fi.EOPBADSTATE, "endpoint was not made from a connection request"},
		{"cancel 010x", fi.EINVAL, `bad number "010x": want decimal or 0x hex digits`},
	} {
		err := ep.Ctl(context.Background(), 0, tt.cmd+"\n")
		wantCode(t, tt.cmd, err, tt.code)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: %v, want prefix %q", tt.cmd, err, tt.want)
		}
		if ep.Err() != "" {
			t.Errorf("%q: Ctl wrote err %q", tt.cmd, ep.Err())
		}
	}

	// The endpoint states read as words.
	a, _, _, _, _ := pair(t, d, "bind cq c send,recv")
	err := a.Ctl(context.Background(), 0, "enable")
	if wantCode(t, "enable twice", err, fi.EOPBADSTATE); err == nil || err.Error() != "endpoint is connected; it was enabled already and is not enabled again" {
		t.Errorf("enable twice: %v", err)
	}
}

// pair connects two endpoints through a passive endpoint and returns them
// with the shared EQ and CQ. Each endpoint gets "bind eq e", then binds (at
// least a bind of cq c), then enable.
func pair(t testing.TB, d *core.Domain, binds ...string) (a, b, pep *core.Object, eq *core.EQ, cq *core.CQ) {
	t.Helper()
	return pairEnabled(t, d, true, binds...)
}

// pairEnabled is pair, with enable before connect and accept or, if not
// enable, without.
func pairEnabled(t testing.TB, d *core.Domain, enable bool, binds ...string) (a, b, pep *core.Object, eq *core.EQ, cq *core.CQ) {
	t.Helper()
	eqo := create(t, d, core.KindEQ, "e")
	cqo := create(t, d, core.KindCQ, "c")
	pep = create(t, d, core.KindPEP, "l")
	run(t, pep, "bind eq e")
	run(t, pep, "listen 127.0.0.1:0")
	addr, err := pep.Impl.(*core.PEP).Name()
	if err != nil {
		t.Fatal(err)
	}
	a = create(t, d, core.KindEP, "a")
	setup := append([]string{"bind eq e"}, binds...)
	if enable {
		setup = append(setup, "enable")
	}
	for _, c := range append(setup, "connect "+addr.String()+" 'hello there'") {
		run(t, a, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err = pep.Impl.(*core.PEP).Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(setup, "accept hex:00ff") {
		run(t, b, c)
	}
	eq, cq = eqo.Impl.(*core.EQ), cqo.Impl.(*core.CQ)
	want := []string{
		"connreq fid=pep/l ep=" + b.ID + " data='hello there'",
		"connected fid=ep/a data=hex:00ff",
		"connected fid=ep/" + b.ID,
	}
	got := events(t, eq, len(want))
	for _, w := range want {
		if !strings.Contains(got, w+"\n") {
			t.Fatalf("EQ events:\n%s\nwant %q", got, w)
		}
	}
	return a, b, pep, eq, cq
}

// events reads n EQ events as text.
func events(t testing.TB, eq *core.EQ, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for n > 0 {
		es, err := eq.Read(ctx, n, true)
		if err != nil {
			t.Fatalf("EQ read: %v (so far: %s)", err, b.String())
		}
		for _, e := range es {
			b.WriteString(e.String() + "\n")
		}
		n -= len(es)
	}
	return b.String()
}

func TestDataStream(t *testing.T) {
	d := lo(t)
	a, b, _, eq, cq := pair(t, d, "bind cq c send,recv")
	ctx := context.Background()
	epA, epB := a.Impl.(*core.EP), b.Impl.(*core.EP)
	if err := epA.WriteData(ctx, []byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	// A small reader gets the message in pieces, then end of file.
	buf := make([]byte, 4)
	var got []byte
	for off := int64(0); ; {
		n, err := epB.ReadData(ctx, buf, off)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
		off += int64(n)
	}
	if string(got) != "abcdef" {
		t.Errorf("received %q", got)
	}
	// Empty messages and large ones cross intact.
	big := []byte(strings.Repeat("0123456789", 100000))
	for _, msg := range [][]byte{big, {}} {
		sent := make(chan error, 1)
		go func() { sent <- epB.WriteData(ctx, msg) }()
		rbuf := make([]byte, len(msg)+1)
		n, err := epA.ReadData(ctx, rbuf, 0)
		if err != nil || string(rbuf[:n]) != string(msg) {
			t.Errorf("message of %d bytes: read %d, %v", len(msg), n, err)
		}
		if err := <-sent; err != nil {
			t.Errorf("send of %d bytes: %v", len(msg), err)
		}
	}
	es, err := cq.Read(ctx, 10, false)
	if err != nil || len(es) != 6 {
		t.Fatalf("cq: %v, %v; want 6 completions", es, err)
	}
	if es[0].Flags != fi.CQFlags(fi.MSG|fi.SEND) || es[0].Len != 6 || es[1].Flags != fi.CQFlags(fi.MSG|fi.RECV) || es[1].Len != 6 {
		t.Errorf("first completions: %v, %v", es[0], es[1])
	}
	// A read interrupted before anything arrives leaves nothing behind.
	ictx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = epA.ReadData(ictx, rbufOf(16), 0)
	cancel()
	wantCode(t, "interrupted read", err, fi.EINTR)
	go epB.WriteData(ctx, []byte("after"))
	rb := rbufOf(16)
	if n, err := epA.ReadData(ctx, rb, 0); err != nil || string(rb[:n]) != "after" {
		t.Errorf("read after an interrupted one: %q, %v", rb[:n], err)
	}
	run(t, a, "shutdown")
	// Both sides report FI_SHUTDOWN, as libfabric's tcp provider does.
	evs := events(t, eq, 2)
	for _, w := range []string{"shutdown fid=ep/a\n", "shutdown fid=ep/" + b.ID + "\n"} {
		if !strings.Contains(evs, w) {
			t.Errorf("after shutdown of a, EQ has %q, want %q", evs, w)
		}
	}
	wantCode(t, "write after shutdown", epA.WriteData(ctx, []byte("x")), fi.ENOTCONN)
}

func rbufOf(n int) []byte { return make([]byte, n) }

func TestReject(t *testing.T) {
	d := lo(t)
	eq := create(t, d, core.KindEQ, "e")
	cq := create(t, d, core.KindCQ, "c")
	pep := create(t, d, core.KindPEP, "")
	run(t, pep, "bind eq e")
	run(t, pep, "listen 127.0.0.1:0")
	addr, _ := pep.Impl.(*core.PEP).Name()
	a := create(t, d, core.KindEP, "a")
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable", "connect " + addr.String()} {
		run(t, a, c)
	}
	b, err := pep.Impl.(*core.PEP).Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	run(t, b, "reject 'go away'")
	got := events(t, eq.Impl.(*core.EQ), 2)
	if !strings.Contains(got, "error fid=ep/a err=FI_ECONNREFUSED prov_errno=0 data='go away'\n") {
		t.Errorf("EQ after reject:\n%s", got)
	}
	if !strings.Contains(a.Err(), "connection") || !strings.Contains(a.Status().String(), " error ") {
		t.Errorf("rejected endpoint: err %q status %q", a.Err(), a.Status().String())
	}
	// The endpoint made for the request dies with its clone pep.
	pep.Release()
	if present(d, core.KindEP, b.ID) || present(d, core.KindPEP, pep.ID) {
		t.Error("pep or its request's endpoint survived the pep's last file")
	}
	_ = cq
}

func TestCounterWait(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindCntr, "n")
	c := o.Impl.(*core.Cntr)
	go func() {
		time.Sleep(10 * time.Millisecond)
		run(t, o, "add 3")
	}()
	run(t, o, "wait 3 5000")
	if c.Value() != 3 {
		t.Errorf("value %d", c.Value())
	}
	wantCode(t, "wait timeout", o.Ctl(context.Background(), 0, "wait 4 10"), fi.ETIMEDOUT)
	run(t, o, "seterr 2")
	if c.Errors() != 2 {
		t.Errorf("errors %d", c.Errors())
	}
}

func TestAV(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindAV, "v")
	run(t, o, "insert 127.0.0.1:7000 [::1]:7001 fi_sockaddr_in://10.1.2.3:9")
	run(t, o, "remove 1")
	want := "0 fi_sockaddr_in://127.0.0.1:7000\n2 fi_sockaddr_in://10.1.2.3:9\n"
	if got := o.Impl.(*core.AV).Addrs(); got != want {
		t.Errorf("addrs %q, want %q", got, want)
	}
	wantCode(t, "remove twice", o.Ctl(context.Background(), 0, "remove 1"), fi.ENOENT)
}

// TestMRKeys: a requested key in use by another region of the domain is
// refused with FI_ENOKEY, as fi_mr_reg does, and is free again once that
// region is gone; keys the daemon picks differ.
func TestMRKeys(t *testing.T) {
	d := lo(t)
	mr := func(name, key string) (*core.Object, error) {
		o := create(t, d, core.KindMR, name)
		for _, a := range o.Impl.Attrs() {
			switch a.Name {
			case "len":
				if err := a.Set("4096"); err != nil {
					t.Fatal(err)
				}
			case "requested_key":
				if key != "" {
					if err := a.Set(key); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		return o, o.Ctl(context.Background(), 0, "reg")
	}
	a, err := mr("a", "7")
	if err != nil {
		t.Fatal(err)
	}
	b, err := mr("b", "7")
	wantCode(t, "reg of a key in use", err, fi.ENOKEY)
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ctl(context.Background(), 0, "reg"); err != nil {
		t.Errorf("reg of key 7 after its region is gone: %v", err)
	}
	x, err := mr("x", "")
	if err != nil {
		t.Fatal(err)
	}
	y, err := mr("y", "")
	if err != nil {
		t.Fatal(err)
	}
	if kx, ky := x.Impl.(*core.MR).Key(), y.Impl.(*core.MR).Key(); kx == ky || kx == 7 || ky == 7 {
		t.Errorf("picked keys %#x and %#x (and 7 in use)", kx, ky)
	}
}

// TestMRDefaultAccess: a region allows no peer access until attr/access
// asks for it. fi_mr(3): access "Indicates the type of operations that
// the local or a peer endpoint may perform on registered memory region",
// and FI_REMOTE_WRITE: "The memory buffer may be used as the target
// buffer of an RMA write or atomic operation."; FI_REMOTE_READ: "The
// memory buffer may be used as the source buffer of an RMA read operation
// on the target side." So a peer's write to or read from a region with
// the default access fails (ending the connection) and leaves it as it
// was; with FI_REMOTE_WRITE and FI_REMOTE_READ set, both work.
func TestMRDefaultAccess(t *testing.T) {
	ctx := context.Background()
	// setup connects two endpoints of a new domain, and registers a
	// local region x holding "payload!" and a target region y with
	// access (the default if ""), holding "secret!!" at 8.
	setup := func(access string) (a *core.Object, eq *core.EQ, xm, ym []byte, key uint64) {
		d := lo(t)
		a, _, _, eq, _ = pair(t, d, "bind cq c send,recv")
		reg := func(name, access string) (*core.MR, []byte) {
			o := create(t, d, core.KindMR, name)
			for _, at := range o.Impl.Attrs() {
				if at.Name == "len" {
					if err := at.Set("64"); err != nil {
						t.Fatal(err)
					}
				}
				if at.Name == "access" && access != "" {
					if err := at.Set(access); err != nil {
						t.Fatal(err)
					}
				}
				if at.Name == "access" && access == "" && at.Get() != (fi.SEND|fi.RECV|fi.READ|fi.WRITE).String() {
					t.Errorf("default access %s, want FI_SEND, FI_RECV, FI_READ, FI_WRITE", at.Get())
				}
			}
			run(t, o, "reg")
			shm, err := o.Impl.(*core.MR).Region()
			if err != nil {
				t.Fatal(err)
			}
			return o.Impl.(*core.MR), shm.Mem
		}
		_, xm = reg("x", "")
		copy(xm, "payload!")
		y, ym := reg("y", access)
		copy(ym[8:], "secret!!")
		return a, eq, xm, ym, y.Key()
	}

	a, eq, _, ym, key := setup("")
	// A write completes when its bytes are in the socket (docs/abi.md);
	// the target refuses it and ends the connection.
	a.Ctl(ctx, 0, fmt.Sprintf("write x 0 8 0 %#x", key))
	if ev := events(t, eq, 1); !strings.Contains(ev, "fid=ep/") {
		t.Errorf("after a write to a region without FI_REMOTE_WRITE, EQ has %q, want the connection's end", ev)
	}
	if string(ym[:8]) == "payload!" {
		t.Error("a peer wrote a region with the default access")
	}

	a, _, xm, _, key := setup("")
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 16 8 8 %#x", key)); err == nil {
		t.Error("a peer's read of a region with the default access succeeded")
	}
	if string(xm[16:24]) == "secret!!" {
		t.Error("a peer read a region with the default access")
	}

	a, _, xm, ym, key = setup("FI_REMOTE_WRITE,FI_REMOTE_READ")
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 16 8 8 %#x", key)); err != nil || string(xm[16:24]) != "secret!!" {
		t.Errorf("read of a region with FI_REMOTE_READ: %v, got %q", err, xm[16:24])
	}
	if err := a.Ctl(ctx, 0, fmt.Sprintf("write x 0 8 0 %#x", key)); err != nil {
		t.Errorf("write to a region with FI_REMOTE_WRITE: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); string(ym[:8]) != "payload!"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the region with FI_REMOTE_WRITE holds %q 5 s after the write", ym[:8])
		}
	}
}

// TestConnectAcceptEnable: "Calling connect or accept on an endpoint will
// implicitly enable an endpoint if it has not already been enabled"; and
// an endpoint disabled by a shutdown is not enabled again ("The ability to
// transition back into an enabled state is provider specific").
func TestConnectAcceptEnable(t *testing.T) {
	d := lo(t)
	a, b, _, _, _ := pairEnabled(t, d, false, "bind cq c send,recv")
	for _, o := range []*core.Object{a, b} {
		if st := o.Impl.Status().String(); !strings.Contains(st, " connected ") {
			t.Errorf("%s after connect/accept without enable: %s", o.ID, st)
		}
	}
	run(t, b, "shutdown")
	if st := b.Impl.Status().String(); !strings.Contains(st, " shutdown ") {
		t.Fatalf("after shutdown: %s", st)
	}
	err := b.Ctl(context.Background(), 0, "enable")
	wantCode(t, "enable after shutdown", err, fi.EOPBADSTATE)
}

// TestMRRegisterAsync: fi_domain(3): "Binding an event queue to a domain
// with the FI_REG_MR flag indicates that the provider should perform all
// memory registration operations asynchronously, with the completion
// reported through the event queue. If an event queue is not bound to the
// domain with the FI_REG_MR flag, then memory registration requests
// complete synchronously." A region's `bind eq` is that binding for the
// region: reg returns at once and FI_MR_COMPLETE (fi_eq(3)) follows on the
// EQ; a failed registration is an error event; the bound EQ is busy while
// the region lives; without an EQ no event is made.
func TestMRRegisterAsync(t *testing.T) {
	d := lo(t)
	eqo := create(t, d, core.KindEQ, "e")
	eq := eqo.Impl.(*core.EQ)
	setLen := func(o *core.Object, v string) {
		for _, a := range o.Impl.Attrs() {
			if a.Name == "len" {
				if err := a.Set(v); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	m := create(t, d, core.KindMR, "m")
	setLen(m, "4096")
	run(t, m, "bind eq e")
	wantCode(t, "a second bind eq", m.Ctl(context.Background(), 0, "bind eq e"), fi.EINVAL)
	run(t, m, "reg")
	if got, want := events(t, eq, 1), "mr_complete fid=mr/m\n"; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
	if k := m.Impl.(*core.MR).Key(); k == uint64(fi.KEY_NOTAVAIL) {
		t.Error("no key after FI_MR_COMPLETE")
	}
	wantCode(t, "bind eq after reg", m.Ctl(context.Background(), 0, "bind eq e"), fi.EBUSY)
	wantCode(t, "Remove of the EQ a region is bound to", eqo.Remove(), fi.EBUSY)

	// A key in use fails the registration: reg itself succeeds, the EQ
	// gets the error, and err says it.
	var key string
	for _, a := range m.Impl.Attrs() {
		if a.Name == "key" {
			key = a.Get()
		}
	}
	bad := create(t, d, core.KindMR, "bad")
	setLen(bad, "4096")
	for _, a := range bad.Impl.Attrs() {
		if a.Name == "requested_key" {
			if err := a.Set(key); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(t, bad, "bind eq e")
	run(t, bad, "reg")
	if got, want := events(t, eq, 1), "error fid=mr/bad err=FI_ENOKEY prov_errno=0\n"; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
	if !strings.Contains(bad.Err(), "reg: ") || !strings.Contains(bad.Status().String(), "unregistered") {
		t.Errorf("after a failed registration: err %q, status %q", bad.Err(), bad.Status())
	}

	// Without an EQ: synchronous, no event.
	s := create(t, d, core.KindMR, "s")
	setLen(s, "4096")
	run(t, s, "reg")
	if k := s.Impl.(*core.MR).Key(); k == uint64(fi.KEY_NOTAVAIL) {
		t.Error("synchronous reg returned without a key")
	}
	if ready, _ := eq.Ready(); ready {
		t.Error("a synchronous registration made an event")
	}
	for _, o := range []*core.Object{m, bad, s} {
		if err := o.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if err := eqo.Remove(); err != nil {
		t.Errorf("Remove of the EQ once its regions are gone: %v", err)
	}
}
