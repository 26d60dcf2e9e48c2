package tcp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/testhex"
	"github.com/fabricfs/fabricfs/providers/tcp/wire"
)

// rawDial connects a plain TCP socket to addr.
func rawDial(t testing.TB, addr fi.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.IP.String())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitClosed checks that the peer closes c: a read ends with EOF or reset.
func waitClosed(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitTime))
	_, err := io.Copy(io.Discard, c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("connection not closed by the peer: %v", err)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

var badConnReqs = []struct {
	name string
	wire string
}{
	{"version 2", "02 00 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"over-long data", "03 00 012c 00000000 0000000000000000 0000000000000000 0100000000000000" + strings.Repeat("00", 300)},
	{"connresp", "03 01 0000 00000000 0000000000000000 0000000000000000 0100000000000000"},
	{"reject", "03 06 0000 00000000 0000000000000000 0000000000000000 0000000000000000"},
	{"big-endian peer", "03 00 0000 00000000 0000000000000000 0000000000000000 0000000000000001"},
	{"short header", "03 00 0000 00000000"},
	{"data cut", "03 00 0010 00000000 0000000000000000 0000000000000000 0100000000000000 0102"},
	{"http", hex.EncodeToString([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))},
	{"silence", ""},
}

// TestListenerGarbage sends malformed connection requests: each connection
// is closed without a ConnReq, and the listener keeps serving.
func TestListenerGarbage(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 300 * time.Millisecond
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	for _, tt := range badConnReqs {
		c := rawDial(t, addr)
		if b := testhex.Bytes(t, tt.wire); len(b) > 0 {
			c.Write(b)
		}
		if tt.name == "short header" || tt.name == "data cut" {
			c.(*net.TCPConn).CloseWrite()
		}
		waitClosed(t, c)
		c.Close()
		select {
		case r := <-pev.Reqs:
			t.Errorf("%s: got a connection request %q", tt.name, r.Data())
		default:
		}
	}
	// Still serving.
	cli := dial(t, d, info, addr, []byte("ok"))
	defer cli.ep.Close()
	srv, _ := accept(t, d, pev, nil)
	defer srv.ep.Close()
	cli.ev.WaitConnected(t)
}

// rawPeer is a plain TCP client connected and accepted by a fabricfs
// endpoint.
func rawPeer(t *testing.T) (net.Conn, side, func()) { return rawPeerCaps(t, 0) }

// rawPeerCaps is rawPeer with extra capabilities for the fabricfs side.
func rawPeerCaps(t *testing.T, caps fi.Caps) (net.Conn, side, func()) {
	d, info := loDomain()
	info.Caps |= caps
	pep, pev := listen(t, d, info)
	addr, _ := pep.Name()
	c := rawDial(t, addr)
	msg, _ := wire.AppendCM(nil, wire.CMConnReq, []byte("raw"), nil)
	c.Write(msg)
	srv, _ := accept(t, d, pev, []byte("welcome"))
	srv.ev.WaitConnected(t)
	resp := make([]byte, wire.CMHeaderSize+7)
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatal(err)
	}
	if h, data, _, _, err := wire.DecodeCM(resp); err != nil || h.Type != wire.CMConnResp || string(data) != "welcome" {
		t.Fatalf("connresp %x: %v", resp, err)
	}
	return c, srv, func() { c.Close(); srv.ep.Close(); pep.Close() }
}

var badMessages = []struct {
	name string
	wire string
	code fi.Errno
}{
	{"version 9", "09 00 0000 00 00 10 00 1000000000000000", fi.EIO},
	{"hdr_size 200", "03 00 0000 00 00 c8 00 c800000000000000", fi.EIO},
	{"hdr_size 8", "03 00 0000 00 00 08 00 1000000000000000", fi.EIO},
	{"op 7", "03 07 0000 00 00 10 00 1000000000000000", fi.EIO},
	{"size < hdr_size", "03 00 0100 00 00 18 00 1000000000000000 0000000000000000", fi.EIO},
	{"hdr_size inconsistent", "03 00 0000 00 00 18 00 1800000000000000 0000000000000000", fi.EIO},
	{"unsolicited ACK", "03 00 0000 02 00 10 00 1000000000000000", fi.EIO},
	{"srx tagged", "03 01 0000 00 00 18 00 1900000000000000 0500000000000000 ff", fi.EIO},
	{"rxm tagged", "03 00 8000 00 00 18 00 1900000000000000 0500000000000000 ff", fi.EIO},
	{"RMA write", "03 04 0000 00 01 28 00 2900000000000000 0000000000000000 0100000000000000 0000000000000000 ff", fi.EIO},
	{"read request", "03 02 0000 00 01 28 00 2800000000000000 0000000000000000 0100000000000000 0000000000000000", fi.EIO},
	{"2^60 bytes", "03 00 0000 00 00 10 00 1000000000000010", fi.EMSGSIZE},
	{"64 MiB + 1", "03 00 0000 00 00 10 00 1100000400000000", fi.EMSGSIZE},
	{"cut payload", "03 00 0000 00 00 10 00 2000000000000000 0102", fi.ECONNRESET},
	{"cut header", "03 00 0100 00 00 18 00 1800000000000000 01", fi.ECONNRESET},
}

// TestConnectedGarbage sends malformed messages on an established
// connection: the endpoint fails with the right code and closes the
// connection, and never panics.
func TestConnectedGarbage(t *testing.T) {
	for _, tt := range badMessages {
		t.Run(tt.name, func(t *testing.T) {
			c, srv, done := rawPeer(t)
			defer done()
			// One good message first, into a posted buffer.
			good, _ := wire.AppendHeader(nil, &wire.Header{Op: wire.OpMsg, Len: 2})
			c.Write(append(good, "ok"...))
			buf := make([]byte, 4)
			post(t, srv.ep, &core.Op{Kind: core.OpRecv, Buf: buf})
			if d := waitDone(t, srv.done); d.c.Err != 0 || string(buf[:d.c.Len]) != "ok" {
				t.Fatalf("good message: %+v", d.c)
			}
			dyn := &core.Op{Kind: core.OpRecv} // a receive without a buffer
			post(t, srv.ep, dyn)
			c.Write(testhex.Bytes(t, tt.wire))
			if tt.code == fi.ECONNRESET {
				c.(*net.TCPConn).CloseWrite()
			}
			f := srv.ev.WaitFailed(t)
			if !errors.Is(f.Err, tt.code) {
				t.Errorf("Failed(%v), want %v", f.Err, tt.code)
			}
			d := waitDone(t, srv.done)
			want := fi.ECANCELED
			if tt.code == fi.EMSGSIZE {
				want = fi.EMSGSIZE
			}
			if d.op != dyn || d.c.Err != want || (tt.code == fi.EMSGSIZE && dyn.Buf != nil) {
				t.Errorf("pending receive completed with %+v, buf %d bytes; want %v", d.c, len(dyn.Buf), want)
			}
			waitClosed(t, c)
			if err := srv.ep.Post(&core.Op{Kind: core.OpSend}); !errors.Is(err, fi.ENOTCONN) {
				t.Errorf("send after failure = %v, want ENOTCONN", err)
			}
		})
	}
}

// TestConnectToGarbage connects to listeners that answer badly.
func TestConnectToGarbage(t *testing.T) {
	answers := []struct {
		name   string
		answer string
		code   fi.Errno
	}{
		{"bad version", "04 01 0000 00000000 0000000000000000 0000000000000000 0100000000000000", fi.EIO},
		{"connreq back", "03 00 0000 00000000 0000000000000000 0000000000000000 0100000000000000", fi.EIO},
		{"over-long", "03 01 0101 00000000 0000000000000000 0000000000000000 0100000000000000", fi.EIO},
		{"hang up", "", fi.ECONNREFUSED},
		{"cut data", "03 01 0010 00000000 0000000000000000 0000000000000000 0100000000000000 00", fi.EIO},
	}
	for _, tt := range answers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.ReadFull(c, make([]byte, wire.CMHeaderSize+2))
			c.Write(testhex.Bytes(t, tt.answer))
			c.Close()
		}()
		d, info := loDomain()
		cli := dial(t, d, info, sockAddr(ln.Addr()), []byte("hi"))
		f := cli.ev.WaitFailed(t)
		if !errors.Is(f.Err, tt.code) {
			t.Errorf("%s: Failed(%v), want %v", tt.name, f.Err, tt.code)
		}
		cli.ep.Close()
		ln.Close()
	}
}

// TestSlowClientDoesNotBlock checks that a silent connection does not hold
// up others: each request is read by its own goroutine.
func TestSlowClientDoesNotBlock(t *testing.T) {
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	silent := rawDial(t, addr)
	defer silent.Close()
	cli := dial(t, d, info, addr, nil)
	defer cli.ep.Close()
	srv, req := accept(t, d, pev, nil)
	defer srv.ep.Close()
	cli.ev.WaitConnected(t)
	if !bytes.Equal(req.Data(), nil) {
		t.Errorf("data %q", req.Data())
	}
}

// TestRxmTaggedReceive sends what libfabric's rxm sends for a small tagged
// message (OpMsg with the tagged flag and the tag in the header) to an
// endpoint opened with FI_TAGGED, as the RDM layer opens its connections:
// it fills the next receive and reports the tag. (Without FI_TAGGED the
// same bytes fail the connection: badMessages, "rxm tagged".)
func TestRxmTaggedReceive(t *testing.T) {
	c, srv, done := rawPeerCaps(t, fi.TAGGED)
	defer done()
	buf := make([]byte, 8)
	post(t, srv.ep, &core.Op{Kind: core.OpRecv, Buf: buf})
	c.Write(testhex.Bytes(t, "03 00 8100 00 00 20 00 2300000000000000 0700000000000000 0500000000000000 616263"))
	d := waitDone(t, srv.done)
	want := fi.CQFlags(fi.MSG | fi.RECV | fi.TAGGED | fi.REMOTE_CQ_DATA)
	if d.c.Err != 0 || d.c.Flags != want || d.c.Tag != 5 || d.c.Data != 7 || string(buf[:d.c.Len]) != "abc" {
		t.Fatalf("completion %+v (flags %v), buf %q; want tag 5, data 7, flags %v, \"abc\"", d.c, d.c.Flags, buf[:d.c.Len], want)
	}
}
