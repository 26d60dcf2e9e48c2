package rxm

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
	tcpwire "github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// A raw peer speaks the tcp and rxm wire by hand, to send what a real peer
// would not.

// rawConnect dials r's listener and sends a connect request with data; it
// returns the connection and the answer (its type and private data).
func rawConnect(t *testing.T, r *rdm, data []byte) (net.Conn, tcpwire.CMType, []byte) {
	t.Helper()
	return rawConnectFrom(t, r, "", data)
}

// rawConnectFrom is rawConnect from the local address src ("" for any).
func rawConnectFrom(t *testing.T, r *rdm, src string, data []byte) (net.Conn, tcpwire.CMType, []byte) {
	t.Helper()
	var d net.Dialer
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", r.addr.IP.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	msg, err := tcpwire.AppendCM(nil, tcpwire.CMConnReq, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(waitTime))
	hb := make([]byte, tcpwire.CMHeaderSize)
	if _, err := io.ReadFull(c, hb); err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	h, err := tcpwire.DecodeCMHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	pd := make([]byte, h.DataLen)
	if _, err := io.ReadFull(c, pd); err != nil {
		t.Fatal(err)
	}
	return c, h.Type, pd
}

// rawPeer connects as a peer listening on port and returns the connection
// and the index r announced for it (the conn_id to send).
func rawPeer(t *testing.T, r *rdm, port uint16) (net.Conn, uint64) {
	t.Helper()
	cd := wire.NewConnect(port, wire.MakeConnID(7, 0))
	data, err := cd.Encode()
	if err != nil {
		t.Fatal(err)
	}
	c, typ, pd := rawConnect(t, r, data)
	if typ != tcpwire.CMConnResp {
		t.Fatalf("answer %v %x, want an accept", typ, pd)
	}
	acc, err := wire.DecodeAccept(pd)
	if err != nil {
		t.Fatal(err)
	}
	if acc.ConnID.PID() != r.ep.pid {
		t.Errorf("accept ConnID %#x: pid is not the endpoint's %#x", uint64(acc.ConnID), r.ep.pid)
	}
	return c, uint64(acc.ConnID.Index())
}

// rawSend sends one tcp OpMsg message with payload.
func rawSend(t *testing.T, c net.Conn, payload []byte) {
	t.Helper()
	h := tcpwire.Header{Op: tcpwire.OpMsg, Len: uint64(len(payload))}
	b, err := tcpwire.AppendHeader(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(append(b, payload...)); err != nil {
		t.Fatal(err)
	}
}

// rxmMsg is an rxm header h and body.
func rxmMsg(t *testing.T, h wire.Header, body []byte) []byte {
	t.Helper()
	b, err := wire.AppendHeader(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, body...)
}

// waitClosed reads until the endpoint closes c.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitTime))
	if _, err := io.Copy(io.Discard, c); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("connection not closed: %v", err)
	}
}

// wantAsyncError waits for an asynchronous error containing text.
func wantAsyncError(t *testing.T, r *rdm, text string) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for {
		for _, err := range r.ev.errors() {
			if strings.Contains(err.Error(), text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no error with %q; errors: %v", text, r.ev.errors())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMalformedPeers: bad connect data is rejected; bad messages close
// their connection only, with the reason as an asynchronous error; good
// messages of a raw peer are delivered with its announced address; the
// endpoint keeps working with its other peers.
func TestMalformedPeers(t *testing.T) {
	p, d := testDomain(t)
	r, good := newRDM(t, p, d), newRDM(t, p, d)

	t.Run("connect-data", func(t *testing.T) {
		cd := wire.NewConnect(1, 0)
		data, _ := cd.Encode()
		binary.LittleEndian.PutUint32(data[8:], 8192) // another eager limit
		for _, bad := range [][]byte{data, data[:10], nil, []byte("hello, rxm! this is not connect data")} {
			c, typ, pd := rawConnect(t, r, bad)
			if rej, err := wire.DecodeReject(pd); typ != tcpwire.CMReject || err != nil || rej.Reason != wire.RejectConnRefused {
				t.Errorf("connect data %x: answer %v %x, want a reject with reason ECONNREFUSED", bad, typ, pd)
			}
			c.Close()
		}
		wantAsyncError(t, r, "eager limit")
	})

	t.Run("good-raw-peer", func(t *testing.T) {
		c, idx := rawPeer(t, r, 40001)
		recv := r.recv(t, core.OpTRecv, 64, 9, 0)
		rawSend(t, c, rxmMsg(t, wire.Eager(idx, wire.OpTagged, 5, wire.FlagRemoteCQData, 42, 9), []byte("hello")))
		got := r.waitFor(t, recv)
		src := fi.SockAddr(canon(netipFrom(t, "127.0.0.1:40001")))
		if got.Err != 0 || string(recv.Buf[:got.Len]) != "hello" || got.Data != 42 || got.Src != src || got.Tag != 9 {
			t.Errorf("raw peer's message: %+v, want from %v", got, src)
		}
		// A credit message is ignored, as libfabric ignores it.
		rawSend(t, c, rxmMsg(t, wire.Header{Type: wire.CtrlCredit, Op: wire.OpMsg}, nil))
		recv2 := r.recv(t, core.OpRecv, 64, 0, 0)
		rawSend(t, c, rxmMsg(t, wire.Eager(idx, wire.OpMsg, 2, 0, 0, 0), []byte("ok")))
		if got := r.waitFor(t, recv2); got.Err != 0 || string(recv2.Buf[:got.Len]) != "ok" {
			t.Errorf("after a credit message: %+v", got)
		}
	})

	bad := []struct {
		name, why string
		msg       func(idx uint64) []byte
	}{
		{"version", "header versions", func(idx uint64) []byte {
			b := rxmMsg(t, wire.Eager(idx, wire.OpMsg, 1, 0, 0, 0), []byte("x"))
			b[0] = 3
			return b
		}},
		{"conn_id", "conn_id", func(idx uint64) []byte {
			return rxmMsg(t, wire.Eager(idx+5, wire.OpMsg, 1, 0, 0, 0), []byte("x"))
		}},
		{"size", "body of", func(idx uint64) []byte {
			return rxmMsg(t, wire.Eager(idx, wire.OpMsg, 100, 0, 0, 0), []byte("short"))
		}},
		{"short", "short", func(uint64) []byte { return []byte("tiny") }},
		{"too-long", "more than an eager message", func(idx uint64) []byte {
			return append(rxmMsg(t, wire.Eager(idx, wire.OpMsg, EagerLimit, 0, 0, 0), make([]byte, EagerLimit)), make([]byte, 200)...)
		}},
		{"unsolicited-atomic-response", "not an atomic in flight", func(idx uint64) []byte {
			h := wire.Header{Type: wire.CtrlAtomicResp, ConnID: idx, Op: wire.OpAtomic, Size: 8}
			return rxmMsg(t, h, make([]byte, 8))
		}},
		{"atomic-bad-datatype", "atomic request with datatype 200", func(idx uint64) []byte {
			h := wire.Header{Type: wire.CtrlAtomic, ConnID: idx, Op: wire.OpAtomic, Size: wire.AtomicHeaderSize,
				Tag: wire.AtomicTag(200, fi.SUM, 1)}
			return rxmMsg(t, h, make([]byte, wire.AtomicHeaderSize))
		}},
	}
	for i, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c, idx := rawPeer(t, r, uint16(41000+i))
			rawSend(t, c, tc.msg(idx))
			waitClosed(t, c)
			wantAsyncError(t, r, tc.why)
		})
	}

	t.Run("rendezvous", func(t *testing.T) {
		// A raw sender's rendezvous of two entries: the endpoint reads
		// each, then answers read-done with the request's msg_id and
		// the conn_id the raw peer announced (0).
		c, idx := rawPeer(t, r, 42000)
		recv := r.recv(t, core.OpTRecv, 30000, 5, 0)
		msg := pattern(3, 20000)
		rh := wire.RndvHeader{Count: 2}
		rh.Iov[0] = wire.RMAIov{Addr: 0, Len: 12000, Key: 0x80000005}
		rh.Iov[1] = wire.RMAIov{Addr: 100, Len: 8000, Key: 0x80000009}
		body, err := wire.AppendRndvHeader(nil, &rh)
		if err != nil {
			t.Fatal(err)
		}
		rawSend(t, c, rxmMsg(t, wire.RndvReq(idx, 77, wire.OpTagged, 20000, 0, 0, 5), body))
		for i, want := range rh.Iov[:2] {
			h, _ := rawRecv(t, c)
			got := h.RMA[0]
			if h.Op != tcpwire.OpReadReq || h.RMACount != 1 || got.Addr != want.Addr || got.Len != want.Len || got.Key != want.Key {
				t.Fatalf("read request %d: %+v, want %+v", i, h, want)
			}
			part := msg[:12000]
			if i == 1 {
				part = msg[12000:]
			}
			rsp, _ := tcpwire.AppendHeader(nil, &tcpwire.Header{Op: tcpwire.OpReadRsp, Len: uint64(len(part))})
			if _, err := c.Write(append(rsp, part...)); err != nil {
				t.Fatal(err)
			}
		}
		h, payload := rawRecv(t, c)
		var done wire.Header
		if err := done.Decode(payload); h.Op != tcpwire.OpMsg || err != nil || len(payload) != wire.HeaderSize ||
			done.Type != wire.CtrlRndvRdDone || done.ConnID != 0 || done.MsgID != 77 {
			t.Fatalf("read-done: %+v %+v (%v)", h, done, err)
		}
		got := r.waitFor(t, recv)
		if got.Err != 0 || got.Len != 20000 || string(recv.Buf[:got.Len]) != string(msg) || got.Tag != 5 {
			t.Fatalf("rendezvous receive: %+v", got)
		}
	})

	rndv := func(idx uint64, count byte, lens ...uint64) []byte {
		body := make([]byte, wire.RndvHeaderSize)
		var total uint64
		for i, n := range lens {
			binary.LittleEndian.PutUint64(body[i*24+8:], n)
			binary.LittleEndian.PutUint64(body[i*24+16:], 0x80000000)
			total += n
		}
		body[96] = count
		return rxmMsg(t, wire.RndvReq(idx, 1, wire.OpMsg, total, 0, 0, 0), body)
	}
	badRndv := []struct {
		name, why string
		msg       func(idx uint64) []byte
	}{
		{"rndv-count-0", "0 entries", func(idx uint64) []byte { return rndv(idx, 0, 20000) }},
		{"rndv-count-5", "5 entries", func(idx uint64) []byte { return rndv(idx, 5, 20000) }},
		{"rndv-size", "describes", func(idx uint64) []byte {
			b := rndv(idx, 1, 20000)
			binary.LittleEndian.PutUint64(b[40:], 30000) // the rxm header's size
			return b
		}},
		{"rndv-overflow", "overflow", func(idx uint64) []byte { return rndv(idx, 2, 1<<63, 1<<63) }},
		{"rndv-short", "body of", func(idx uint64) []byte { return rndv(idx, 1, 20000)[:wire.HeaderSize+50] }},
		{"read-done-unknown", "read-done for msg_id 12345", func(idx uint64) []byte {
			return rxmMsg(t, wire.ReadDone(idx, 12345), nil)
		}},
		{"read-done-body", "body of", func(idx uint64) []byte {
			return rxmMsg(t, wire.ReadDone(idx, 1), []byte("extra"))
		}},
	}
	for i, tc := range badRndv {
		t.Run(tc.name, func(t *testing.T) {
			c, idx := rawPeer(t, r, uint16(43000+i))
			rawSend(t, c, tc.msg(idx))
			waitClosed(t, c)
			wantAsyncError(t, r, tc.why)
		})
	}

	t.Run("read-unknown-key", func(t *testing.T) {
		// A read of a key the endpoint did not give out ends the
		// connection (the tcp layer's check, as libfabric's).
		c, _ := rawPeer(t, r, 44000)
		h := tcpwire.Header{Op: tcpwire.OpReadReq, RMACount: 1}
		h.RMA[0] = tcpwire.RMAIov{Len: 10, Key: 0x80000000}
		b, _ := tcpwire.AppendHeader(nil, &h)
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c)
	})

	t.Run("read-response-length", func(t *testing.T) {
		// A read response of the wrong length ends the connection, and
		// the receive it was for fails.
		c, idx := rawPeer(t, r, 44001)
		recv := r.recv(t, core.OpRecv, 30000, 0, 0)
		rawSend(t, c, rndv(idx, 1, 20000))
		if h, _ := rawRecv(t, c); h.Op != tcpwire.OpReadReq {
			t.Fatalf("got %+v, want a read request", h)
		}
		rsp, _ := tcpwire.AppendHeader(nil, &tcpwire.Header{Op: tcpwire.OpReadRsp, Len: 10})
		c.Write(append(rsp, make([]byte, 10)...))
		if got := r.waitFor(t, recv); got.Err == 0 {
			t.Errorf("receive of a bad read response: %+v", got)
		}
		waitClosed(t, c)
	})

	// The endpoint still works.
	recv := r.recv(t, core.OpRecv, 64, 0, 0)
	good.send(t, core.OpSend, r.addr, []byte("still here"), 0)
	wantRecv(t, recv, r.waitFor(t, recv), []byte("still here"), 0, good.addr)
}

// rawRecv reads one tcp message: its header and payload.
func rawRecv(t *testing.T, c net.Conn) (tcpwire.Header, []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitTime))
	b := make([]byte, tcpwire.BaseHeaderSize)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	n, err := tcpwire.PeekHeaderSize(b)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, make([]byte, n-len(b))...)
	if _, err := io.ReadFull(c, b[tcpwire.BaseHeaderSize:]); err != nil {
		t.Fatal(err)
	}
	var h tcpwire.Header
	if _, err := h.Decode(b); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, h.Len)
	if _, err := io.ReadFull(c, payload); err != nil {
		t.Fatal(err)
	}
	return h, payload
}

func netipFrom(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
