package verbs

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// udPair makes an FI_EP_DGRAM endpoint on each device's -dgram domain.
func udPair(t *testing.T) (a, b side, nameA, nameB fi.Addr) {
	p := testProvider(t, nil, "127.0.0.1", "127.0.0.2")
	da, db := openDomain(t, p, "rxe_127_0_0_1-dgram"), openDomain(t, p, "rxe_127_0_0_2-dgram")
	a = newSide(t, da, infoOf(t, p, da.name, fi.EP_DGRAM), nil)
	b = newSide(t, db, infoOf(t, p, db.name, fi.EP_DGRAM), nil)
	nameA, _ = a.ep.Name()
	nameB, _ = b.ep.Name()
	if nameA.IP.Port() == 0 || nameB.IP.Addr() != netip.MustParseAddr("127.0.0.2") {
		t.Fatalf("names %v and %v", nameA, nameB)
	}
	return a, b, nameA, nameB
}

// TestDgram: datagrams go to an endpoint's name (resolved once through
// its device's connection manager), carry remote CQ data, report their
// sender once it is known, and are truncated to their receive.
func TestDgram(t *testing.T) {
	a, b, nameA, nameB := udPair(t)
	for i, n := range []int{0, 1, 1000, 4096} {
		msg := pattern(n, i)
		b.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 4096)})
		a.post(t, &core.Op{Kind: core.OpSend, Buf: msg, Peer: nameB, Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: uint64(i)})
		if d := a.wait(t); d.c.Err != 0 || d.c.Len != uint64(n) {
			t.Fatalf("%d bytes: send %+v", n, d.c)
		}
		d := b.wait(t)
		if d.c.Err != 0 || d.c.Len != uint64(n) || !bytes.Equal(d.op.Buf[:n], msg) || d.c.Data != uint64(i) ||
			d.c.Flags != fi.CQFlags(fi.MSG|fi.RECV|fi.REMOTE_CQ_DATA) {
			t.Fatalf("%d bytes: receive %+v", n, d.c)
		}
	}
	// b answers a: it resolves a's name, and from then on knows it as
	// the sender of a's datagrams.
	a.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 16)})
	b.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("pong"), Peer: nameA})
	b.wait(t)
	a.wait(t)
	b.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 10)})
	a.post(t, &core.Op{Kind: core.OpSend, Buf: pattern(100, 3), Peer: nameB})
	a.wait(t)
	d := b.wait(t)
	if d.c.Err != fi.ETRUNC || d.c.Len != 10 || d.c.OLen != 90 || d.c.Src != nameA {
		t.Errorf("truncated datagram %+v, want FI_ETRUNC, 10 + 90 bytes, from %v", d.c, nameA)
	}
	if err := a.try(&core.Op{Kind: core.OpSend, Buf: make([]byte, 4097), Peer: nameB}); !errors.Is(err, fi.EMSGSIZE) {
		t.Errorf("a datagram above the MTU = %v, want FI_EMSGSIZE", err)
	}
	if err := a.try(&core.Op{Kind: core.OpSend, Buf: []byte("x")}); !errors.Is(err, fi.EINVAL) {
		t.Errorf("a datagram without an address = %v, want FI_EINVAL", err)
	}
	if err := a.try(&core.Op{Kind: core.OpWrite, Buf: []byte("x"), Peer: nameB}); !errors.Is(err, fi.EOPNOTSUPP) {
		t.Errorf("RMA on FI_EP_DGRAM = %v, want FI_EOPNOTSUPP", err)
	}
	if err := a.ep.Connect(nameB, nil); !errors.Is(err, fi.EOPBADSTATE) {
		t.Errorf("connect on FI_EP_DGRAM = %v, want FI_EOPBADSTATE", err)
	}
}

// TestDgramNoEndpoint: a datagram to a port without an endpoint fails
// with FI_EHOSTUNREACH once the device says so; the next send asks again.
func TestDgramNoEndpoint(t *testing.T) {
	a, b, _, nameB := udPair(t)
	bad := fi.SockAddr(netip.AddrPortFrom(nameB.IP.Addr(), 1))
	for range 2 {
		a.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("lost"), Peer: bad})
		if d := a.wait(t); d.c.Err != fi.EHOSTUNREACH {
			t.Errorf("send to a port without an endpoint: %+v, want FI_EHOSTUNREACH", d.c)
		}
	}
	b.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	a.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("found"), Peer: nameB})
	if d := b.wait(t); string(d.op.Buf[:d.c.Len]) != "found" {
		t.Errorf("received %q", d.op.Buf[:d.c.Len])
	}
}

// TestDgramClose: closing an endpoint completes its receives with
// FI_ECANCELED and gives its port back.
func TestDgramClose(t *testing.T) {
	a, _, nameA, _ := udPair(t)
	a.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	a.ep.Close()
	if d := a.wait(t); d.c.Err != fi.ECANCELED {
		t.Errorf("receive at close: %+v, want FI_ECANCELED", d.c)
	}
	e := a.ep.(*udEndpoint)
	if _, err := e.d.dev.cm.bindUD(nameA.IP.Port(), nil); err != nil {
		t.Errorf("the closed endpoint's port is still taken: %v", err)
	}
}
