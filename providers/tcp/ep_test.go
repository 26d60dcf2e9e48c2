package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

func TestConnectAccept(t *testing.T) {
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, err := pep.Name()
	if err != nil || addr.IP.Port() == 0 || addr.Format != fi.SOCKADDR_IN {
		t.Fatalf("pep.Name() = %v, %v; want 127.0.0.1 with a port", addr, err)
	}
	cli := dial(t, d, info, addr, []byte("hello from client"))
	defer cli.ep.Close()
	req := pev.WaitReq(t)
	if got := string(req.Data()); got != "hello from client" {
		t.Errorf("req.Data() = %q", got)
	}
	ri := req.Info()
	cname, _ := cli.ep.Name()
	if ri.DestAddr == nil || *ri.DestAddr != cname {
		t.Errorf("req.Info().DestAddr = %v, want the client's address %v", ri.DestAddr, cname)
	}
	ev := provtest.NewEPEvents()
	e, err := d.NewEndpoint(ri, req, ev)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := d.NewEndpoint(ri, req, provtest.NewEPEvents()); err == nil {
		t.Errorf("second NewEndpoint from the same request succeeded")
	}
	if err := e.Accept(bytes.Repeat([]byte("A"), 256)); err != nil {
		t.Fatal(err)
	}
	if got := cli.ev.WaitConnected(t); !bytes.Equal(got, bytes.Repeat([]byte("A"), 256)) {
		t.Errorf("client Connected(%q), want 256 A", got)
	}
	if got := ev.WaitConnected(t); got != nil {
		t.Errorf("server Connected(%q), want nil", got)
	}
	sname, _ := e.Name()
	speer, _ := e.Peer()
	cpeer, _ := cli.ep.Peer()
	if speer != cname || cpeer != sname || sname.IP.Port() != addr.IP.Port() {
		t.Errorf("names: client %v -> %v, server %v -> %v", cname, cpeer, sname, speer)
	}
	if err := e.Accept(nil); !errors.Is(err, fi.EOPBADSTATE) {
		t.Errorf("second Accept = %v, want EOPBADSTATE", err)
	}
}

func TestPrivateDataLimits(t *testing.T) {
	d, info := loDomain()
	e, _ := d.NewEndpoint(info, nil, provtest.NewEPEvents())
	defer e.Close()
	if err := e.Connect(addrOf("127.0.0.1:1"), make([]byte, 257)); !errors.Is(err, fi.EINVAL) {
		t.Errorf("Connect with 257 bytes = %v, want EINVAL", err)
	}
	if err := e.Connect(addrOf("127.0.0.1:0"), nil); !errors.Is(err, fi.EINVAL) {
		t.Errorf("Connect to port 0 = %v, want EINVAL", err)
	}
	if err := e.Accept(nil); !errors.Is(err, fi.EOPBADSTATE) {
		t.Errorf("Accept on an active endpoint = %v, want EOPBADSTATE", err)
	}
	if err := e.Post(&core.Op{Kind: core.OpSend}); !errors.Is(err, fi.ENOTCONN) {
		t.Errorf("send before connect = %v, want ENOTCONN", err)
	}
	if err := e.Post(&core.Op{Kind: core.OpRecv}); !errors.Is(err, fi.EOPBADSTATE) {
		t.Errorf("recv before enable = %v, want EOPBADSTATE", err)
	}
}

func TestReject(t *testing.T) {
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	cli := dial(t, d, info, addr, []byte("let me in"))
	defer cli.ep.Close()
	req := pev.WaitReq(t)
	e, err := d.NewEndpoint(req.Info(), req, provtest.NewEPEvents())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Reject([]byte("go away")); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	e.Close()
	f := cli.ev.WaitFailed(t)
	if !errors.Is(f.Err, fi.ECONNREFUSED) || string(f.Data) != "go away" {
		t.Errorf("Failed(%v, %q), want ECONNREFUSED with \"go away\"", f.Err, f.Data)
	}
	if err := cli.ep.Post(&core.Op{Kind: core.OpSend}); err == nil {
		t.Errorf("send after reject succeeded")
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := sockAddr(ln.Addr())
	ln.Close()
	d, info := loDomain()
	cli := dial(t, d, info, addr, []byte("anyone?"))
	defer cli.ep.Close()
	f := cli.ev.WaitFailed(t)
	if !errors.Is(f.Err, fi.ECONNREFUSED) || f.Data != nil {
		t.Errorf("Failed(%v, %q), want ECONNREFUSED, no data", f.Err, f.Data)
	}
	if code := core.Code(f.Err); code != fi.ECONNREFUSED {
		t.Errorf("core.Code = %v", code)
	}
}

func TestSendRecv(t *testing.T) {
	p := connect(t)
	rbuf := make([]byte, 100)
	recv := &core.Op{Kind: core.OpRecv, Buf: rbuf, Context: 7}
	post(t, p.srv.ep, recv)
	send := &core.Op{Kind: core.OpSend, Buf: []byte("hello, world"), Context: 8,
		Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: 0xfeedface}
	post(t, p.cli.ep, send)
	if d := waitDone(t, p.cli.done); d.op != send || d.c.Err != 0 || d.c.Len != 12 || d.c.Flags != fi.CQFlags(fi.MSG|fi.SEND) {
		t.Errorf("send completion %+v", d.c)
	}
	d := waitDone(t, p.srv.done)
	want := core.Completion{Flags: fi.CQFlags(fi.MSG | fi.RECV | fi.REMOTE_CQ_DATA), Len: 12, Data: 0xfeedface}
	if d.op != recv || d.c != want || string(rbuf[:12]) != "hello, world" {
		t.Errorf("recv completion %+v %q, want %+v", d.c, rbuf[:d.c.Len], want)
	}
	// And back, with an inject whose buffer is reused at once.
	rbuf2 := make([]byte, 100)
	post(t, p.cli.ep, &core.Op{Kind: core.OpRecv, Buf: rbuf2})
	ibuf := []byte("injected")
	post(t, p.srv.ep, &core.Op{Kind: core.OpSend, Buf: ibuf, Flags: fi.INJECT})
	copy(ibuf, "XXXXXXXX")
	if d := waitDone(t, p.cli.done); d.c.Err != 0 || string(rbuf2[:d.c.Len]) != "injected" || d.c.Flags != fi.CQFlags(fi.MSG|fi.RECV) {
		t.Errorf("recv of inject %+v %q", d.c, rbuf2[:d.c.Len])
	}
	waitDone(t, p.srv.done)
	if err := p.srv.ep.Post(&core.Op{Kind: core.OpSend, Buf: make([]byte, InjectSize+1), Flags: fi.INJECT}); !errors.Is(err, fi.EINVAL) {
		t.Errorf("inject of %d bytes = %v, want EINVAL", InjectSize+1, err)
	}
}

// pattern is the content of message i: bytes from a fixed random block.
var patternBlock = func() []byte {
	b := make([]byte, 1<<17)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

func pattern(i, n int) []byte {
	off := (i * 7919) % (len(patternBlock) - n)
	return patternBlock[off : off+n]
}

func TestOrdering(t *testing.T) {
	const count = 10000
	p := connect(t)
	r := rand.New(rand.NewPCG(3, 4))
	sizes := make([]int, count)
	for i := range sizes {
		switch r.IntN(10) {
		case 0:
			sizes[i] = r.IntN(64 << 10) // some large
		case 1:
			sizes[i] = 0
		default:
			sizes[i] = r.IntN(300)
		}
	}
	errc := make(chan error, 1)
	go func() { // receiver: keeps rx_size receives posted, checks each message in order
		next := 0
		posted := 0
		for next < count {
			for posted < count && posted-next < DefaultRxSize {
				op := &core.Op{Kind: core.OpRecv, Buf: make([]byte, 64<<10), Context: uint64(posted)}
				if err := p.srv.ep.Post(op); err != nil {
					errc <- err
					return
				}
				posted++
			}
			d := <-p.srv.done
			i := int(d.op.Context)
			wantData := i%5 == 0 && d.c.Flags&fi.CQFlags(fi.REMOTE_CQ_DATA) != 0 && d.c.Data == uint64(i)
			if i != next || d.c.Err != 0 || int(d.c.Len) != sizes[i] || !bytes.Equal(d.op.Buf[:d.c.Len], pattern(i, sizes[i])) ||
				wantData != (i%5 == 0) {
				errc <- errorf("message %d: got context %d, %+v", next, i, d.c)
				return
			}
			next++
		}
		errc <- nil
	}()
	completed := 0
	for i := 0; i < count; i++ {
		op := &core.Op{Kind: core.OpSend, Buf: pattern(i, sizes[i]), Context: uint64(i)}
		if i%3 == 0 {
			op.Flags = fi.DELIVERY_COMPLETE
		}
		if i%5 == 0 { // a longer header, also after a large message
			op.Flags |= fi.OpFlags(fi.REMOTE_CQ_DATA)
			op.Data = uint64(i)
		}
		for {
			err := p.cli.ep.Post(op)
			if err == nil {
				break
			}
			if !errors.Is(err, fi.EAGAIN) {
				t.Fatalf("Post %d: %v", i, err)
			}
			d := waitDone(t, p.cli.done)
			if d.c.Err != 0 {
				t.Fatalf("send completion %+v", d.c)
			}
			completed++
		}
	}
	for ; completed < count; completed++ {
		if d := waitDone(t, p.cli.done); d.c.Err != 0 {
			t.Fatalf("send completion %+v", d.c)
		}
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTime):
		t.Fatal("receiver did not finish")
	}
}

func errorf(format string, a ...any) error { return core.Errorf(fi.EIO, format, a...) }

func TestDynamicRecv(t *testing.T) {
	p := connect(t)
	for _, n := range []int{0, 1, 5000, 100000} {
		recv := &core.Op{Kind: core.OpRecv}
		post(t, p.srv.ep, recv)
		post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: pattern(n, n)})
		d := waitDone(t, p.srv.done)
		if d.c.Err != 0 || int(d.c.Len) != n || len(recv.Buf) != n || recv.Buf == nil || !bytes.Equal(recv.Buf, pattern(n, n)) {
			t.Errorf("dynamic recv of %d bytes: %+v, buf %d bytes", n, d.c, len(recv.Buf))
		}
		waitDone(t, p.cli.done)
	}
}

func TestTruncation(t *testing.T) {
	p := connect(t)
	small := make([]byte, 10)
	post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: small})
	next := make([]byte, 100)
	post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: next})
	big := pattern(1, 70000)
	post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: big, Flags: fi.DELIVERY_COMPLETE})
	post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte("after")})
	d := waitDone(t, p.srv.done)
	if d.c.Err != fi.ETRUNC || d.c.Len != 10 || d.c.OLen != 69990 || !bytes.Equal(small, big[:10]) {
		t.Errorf("truncated recv: %+v", d.c)
	}
	d = waitDone(t, p.srv.done)
	if d.c.Err != 0 || string(next[:d.c.Len]) != "after" {
		t.Errorf("recv after truncation: %+v %q", d.c, next[:d.c.Len])
	}
	for range 2 {
		if d := waitDone(t, p.cli.done); d.c.Err != 0 {
			t.Errorf("send completion %+v", d.c)
		}
	}
}

// TestDeliveryComplete checks that a send asking for delivery completes
// only once the peer has placed the data and sent its ACK.
func TestDeliveryComplete(t *testing.T) {
	p := connect(t)
	send := &core.Op{Kind: core.OpSend, Buf: []byte("dc"), Flags: fi.TRANSMIT_COMPLETE}
	post(t, p.cli.ep, send)
	noDone(t, p.cli.done, 100*time.Millisecond) // no receive posted yet: no ACK
	post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	waitDone(t, p.srv.done)
	if d := waitDone(t, p.cli.done); d.op != send || d.c.Err != 0 || d.c.Len != 2 {
		t.Errorf("DC send completion %+v", d.c)
	}
}

func TestQueueLimits(t *testing.T) {
	p := connect(t)
	for i := 0; i < DefaultRxSize; i++ {
		post(t, p.cli.ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 1)})
	}
	if err := p.cli.ep.Post(&core.Op{Kind: core.OpRecv}); !errors.Is(err, fi.EAGAIN) {
		t.Errorf("recv %d = %v, want EAGAIN", DefaultRxSize+1, err)
	}
	// Sends that wait for ACKs the server will not send stay outstanding.
	for i := 0; i < DefaultTxSize; i++ {
		post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte("x"), Flags: fi.DELIVERY_COMPLETE})
	}
	if err := p.cli.ep.Post(&core.Op{Kind: core.OpSend}); !errors.Is(err, fi.EAGAIN) {
		t.Errorf("send %d = %v, want EAGAIN", DefaultTxSize+1, err)
	}
	// Close cancels them all.
	p.cli.ep.Close()
	for i := 0; i < DefaultRxSize+DefaultTxSize; i++ {
		select {
		case d := <-p.cli.done:
			if d.c.Err != fi.ECANCELED {
				t.Fatalf("completion %d after Close: %+v", i, d.c)
			}
		default:
			t.Fatalf("only %d completions before Close returned, want %d", i, DefaultRxSize+DefaultTxSize)
		}
	}
	if err := p.cli.ep.Post(&core.Op{Kind: core.OpRecv}); !errors.Is(err, fi.EOPBADSTATE) {
		t.Errorf("recv after Close = %v, want EOPBADSTATE", err)
	}
}

func TestCancel(t *testing.T) {
	p := connect(t)
	a := &core.Op{Kind: core.OpRecv, Buf: make([]byte, 10)}
	b := &core.Op{Kind: core.OpRecv, Buf: make([]byte, 10)}
	post(t, p.srv.ep, a)
	post(t, p.srv.ep, b)
	if !p.srv.ep.Cancel(a) {
		t.Fatalf("Cancel of a posted receive = false")
	}
	if d := waitDone(t, p.srv.done); d.op != a || d.c.Err != fi.ECANCELED || d.c.Flags != fi.CQFlags(fi.MSG|fi.RECV) {
		t.Errorf("cancelled completion %+v", d.c)
	}
	if p.srv.ep.Cancel(a) {
		t.Errorf("second Cancel = true")
	}
	post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte("to b")})
	if d := waitDone(t, p.srv.done); d.op != b || string(b.Buf[:d.c.Len]) != "to b" {
		t.Errorf("after cancel, message went to %+v", d)
	}
}

func TestShutdown(t *testing.T) {
	p := connect(t)
	recv := &core.Op{Kind: core.OpRecv, Buf: make([]byte, 10)}
	post(t, p.srv.ep, recv)
	if err := p.cli.ep.Shutdown(); err != nil {
		t.Fatal(err)
	}
	p.srv.ev.WaitShutdown(t)
	p.cli.ev.WaitShutdown(t)
	if d := waitDone(t, p.srv.done); d.op != recv || d.c.Err != fi.ECANCELED {
		t.Errorf("posted recv after peer shutdown: %+v", d.c)
	}
	if err := p.srv.ep.Post(&core.Op{Kind: core.OpSend}); !errors.Is(err, fi.ENOTCONN) {
		t.Errorf("send after shutdown = %v, want ENOTCONN", err)
	}
	if err := p.cli.ep.Shutdown(); !errors.Is(err, fi.ENOTCONN) {
		t.Errorf("second Shutdown = %v, want ENOTCONN", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := p.srv.ev.Count(); n != 2 {
		t.Errorf("server got %d events, want Connected and one Shutdown", n)
	}
	if n := p.cli.ev.Count(); n != 2 {
		t.Errorf("client got %d events, want Connected and one Shutdown", n)
	}
}

// TestBackPressure checks that a sender is held back, not buffered without
// bound, while the receiver posts no receive.
func TestBackPressure(t *testing.T) {
	p := connect(t)
	buf := make([]byte, 1<<20)
	sent := 0
	for i := 0; i < 64; i++ {
		post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: buf})
	}
	deadline := time.After(300 * time.Millisecond)
loop:
	for {
		select {
		case <-p.cli.done:
			sent++
		case <-deadline:
			break loop
		}
	}
	if sent >= 64 {
		t.Fatalf("all 64 MiB went out with no receive posted")
	}
	for i := 0; i < 64; i++ {
		post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 1<<20)})
		waitDone(t, p.srv.done)
	}
	for ; sent < 64; sent++ {
		waitDone(t, p.cli.done)
	}
}

// TestAckBeforeShutdown checks that a receive asking for delivery complete
// completes only once its ACK is on the wire: the receiver shuts down as
// soon as it sees the message, and the sender's send still succeeds (the
// end of fi_pingpong works this way).
func TestAckBeforeShutdown(t *testing.T) {
	for i := 0; i < 50; i++ {
		p := connect(t)
		post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
		post(t, p.cli.ep, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)}) // sees the EOF
		post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte("fin"), Flags: fi.TRANSMIT_COMPLETE})
		waitDone(t, p.srv.done)
		p.srv.ep.Shutdown()
		if d := waitDone(t, p.cli.done); d.op.Kind != core.OpSend || d.c.Err != 0 {
			t.Fatalf("round %d: first client completion %+v of a %v; want the send, successful", i, d.c, d.op.Kind)
		}
		p.cli.ev.WaitShutdown(t)
	}
}

// TestPostFromCompletion reposts each receive and answers each message from
// inside the completion callbacks, as a layered provider does: nothing
// deadlocks and every message arrives in order.
func TestPostFromCompletion(t *testing.T) {
	p := connect(t)
	const count = 2000
	got := make(chan int, count)
	sent := make(chan struct{}, count)
	srv := p.srv.ep
	repost := func(op *core.Op, c core.Completion) {
		if op.Kind != core.OpRecv {
			if c.Err == 0 {
				sent <- struct{}{}
			}
			return
		}
		if c.Err == 0 {
			got <- int(op.Buf[0]) | int(op.Buf[1])<<8
			if err := srv.Post(&core.Op{Kind: core.OpSend, Buf: []byte("ack"), Flags: fi.INJECT}); err != nil {
				t.Errorf("send from a completion: %v", err)
			}
		}
		if c.Err != fi.ECANCELED {
			if err := srv.Post(&core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)}); err != nil {
				t.Errorf("receive from a completion: %v", err)
			}
		}
	}
	srv.complete = repost
	for range 4 {
		post(t, srv, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	}
	for i := 0; i < count; i++ {
		for {
			err := p.cli.ep.Post(&core.Op{Kind: core.OpSend, Buf: []byte{byte(i), byte(i >> 8)}, Flags: fi.INJECT})
			if err == nil {
				break
			}
			if !errors.Is(err, fi.EAGAIN) {
				t.Fatal(err)
			}
			waitDone(t, p.cli.done)
		}
	}
	for i := 0; i < count; i++ {
		select {
		case n := <-got:
			if n != i {
				t.Fatalf("message %d arrived as %d", i, n)
			}
		case <-time.After(waitTime):
			t.Fatalf("message %d did not arrive", i)
		}
	}
	for i := 0; i < count; i++ {
		select {
		case <-sent:
		case <-time.After(waitTime):
			t.Fatalf("%d of the %d answers posted from completions were sent", i, count)
		}
	}
}

// TestMoreWaitsForFlush: sends posted with FI_MORE (fi_msg(3): "the user
// has additional requests that will immediately be posted after the
// current call returns") stay queued until Flush, or until a send without
// it, and then go out in order.
func TestMoreWaitsForFlush(t *testing.T) {
	p := connect(t)
	const n = 8
	rbufs := make([][]byte, 2*n)
	for i := range rbufs {
		rbufs[i] = make([]byte, 32)
		post(t, p.srv.ep, &core.Op{Kind: core.OpRecv, Buf: rbufs[i], Context: uint64(i)})
	}
	send := func(i int, flags fi.OpFlags) {
		post(t, p.cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte(fmt.Sprintf("message %d", i)), Context: uint64(i), Flags: flags})
	}
	check := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if d := waitDone(t, p.cli.done); d.op.Context != uint64(i) || d.c.Err != 0 {
				t.Fatalf("send completion %+v of context %d, want context %d", d.c, d.op.Context, i)
			}
		}
		for i := from; i < to; i++ {
			d := waitDone(t, p.srv.done)
			want := fmt.Sprintf("message %d", i)
			if d.op.Context != uint64(i) || d.c.Err != 0 || string(rbufs[i][:d.c.Len]) != want {
				t.Fatalf("receive completion %+v of context %d with %q, want context %d with %q", d.c, d.op.Context, rbufs[i][:d.c.Len], i, want)
			}
		}
	}

	for i := range n {
		send(i, fi.MORE)
	}
	noDone(t, p.cli.done, 50*time.Millisecond)
	noDone(t, p.srv.done, 0)
	p.cli.ep.Flush()
	check(0, n)

	// A send without FI_MORE takes the held ones with it.
	send(n, fi.MORE)
	send(n+1, fi.MORE)
	noDone(t, p.cli.done, 20*time.Millisecond)
	send(n+2, 0)
	check(n, n+3)
}
