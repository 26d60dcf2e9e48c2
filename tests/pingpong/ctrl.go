package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// fi_pingpong's control protocol (util/pingpong.c, "Control Messaging"):
// its constants, by their names there.
const (
	defaultCtrlPort = 47592 // the server's control port (pp_ctrl_init's default_ctrl)
	ppMaxAddrLen    = 1024  // PP_MAX_ADDRLEN: the longest address pp_recv_name takes
	ppMsgLenCnt     = 10    // PP_MSG_LEN_CNT: bytes of the message count
)

// The control messages, with the NUL fi_pingpong sends after each string.
var (
	ppMsgSyncQ    = []byte("q\x00")      // PP_MSG_SYNC_Q: the client's sync
	ppMsgSyncA    = []byte("a\x00")      // PP_MSG_SYNC_A: the server's answer
	ppMsgCheckCnt = []byte("cnt ok\x00") // PP_MSG_CHECK_CNT_OK: the server's answer to the count
	ppFinMsg      = []byte("fin\x00")    // pp_finalize's message, sent over the fabric
)

// Why a control read failed.
var (
	errPeerClosed  = errors.New("the peer closed the control connection")
	errPeerTimeout = errors.New("no answer from the peer")
)

// ctrl is the out-of-band control connection. Every read waits at most
// timeout; bad bytes from the peer are errors naming what was expected.
type ctrl struct {
	conn    net.Conn
	timeout time.Duration
	o       *options
}

// listenCtrl listens for the client's control connection on host:port
// (fi_pingpong binds INADDR_ANY; see the package comment).
func listenCtrl(host string, port uint16) (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return l, nil
}

// acceptCtrl waits, without a time limit as fi_pingpong does, for one
// client and stops listening.
func acceptCtrl(l net.Listener, o *options) (*ctrl, error) {
	defer l.Close()
	o.debugf("server: waiting for a control connection on %s", l.Addr())
	c, err := l.Accept()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	o.debugf("server: control connection from %s", c.RemoteAddr())
	return &ctrl{conn: c, timeout: o.timeout, o: o}, nil
}

// dialCtrl connects to the server's control port, from srcPort if it is
// not 0, retrying while the server is not listening yet, for up to
// o.timeout.
func dialCtrl(o *options) (*ctrl, error) {
	d := net.Dialer{Timeout: o.timeout}
	if o.srcPort != 0 {
		d.LocalAddr = &net.TCPAddr{Port: int(o.srcPort)}
	}
	addr := net.JoinHostPort(o.host, strconv.Itoa(int(o.dstPort)))
	deadline := time.Now().Add(o.timeout)
	for {
		c, err := d.Dial("tcp", addr)
		if err == nil {
			o.debugf("client: control connection %s -> %s", c.LocalAddr(), c.RemoteAddr())
			return &ctrl{conn: c, timeout: o.timeout, o: o}, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return nil, fmt.Errorf("control connection to %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *ctrl) close() { c.conn.Close() }

// read reads exactly n bytes of what.
func (c *ctrl) read(what string, n int) ([]byte, error) {
	b := make([]byte, n)
	c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	got, err := io.ReadFull(c.conn, b)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = errPeerClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%w for %v", errPeerTimeout, c.timeout)
	}
	return nil, fmt.Errorf("control: reading %s (%d of %d bytes): %w", what, got, n, err)
}

func (c *ctrl) write(what string, b []byte) error {
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	if _, err := c.conn.Write(b); err != nil {
		return fmt.Errorf("control: sending %s: %w", what, err)
	}
	return nil
}

// expect reads len(want) bytes and fails unless they are want.
func (c *ctrl) expect(what string, want []byte) error {
	b, err := c.read(what, len(want))
	if err != nil {
		return err
	}
	if !bytes.Equal(b, want) {
		return fmt.Errorf("control: bad %s: got %q, want %q", what, b, want)
	}
	return nil
}

// sendName sends an endpoint's address as pp_send_name does: its length
// (u32, big-endian), its address format (u32, native order) and the raw
// address.
func (c *ctrl) sendName(name rawAddr) error {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(name.bytes)))
	b = binary.NativeEndian.AppendUint32(b, uint32(name.format))
	b = append(b, name.bytes...)
	c.o.debugf("sending name: format %d, %d bytes", name.format, len(name.bytes))
	return c.write("the address", b)
}

// recvName reads the peer's address as pp_recv_name does.
func (c *ctrl) recvName() (rawAddr, error) {
	b, err := c.read("the address length", 4)
	if err != nil {
		return rawAddr{}, err
	}
	n := binary.BigEndian.Uint32(b)
	if n == 0 || n > ppMaxAddrLen {
		return rawAddr{}, fmt.Errorf("control: bad address length %d (bytes %x): want 1 to %d", n, b, ppMaxAddrLen)
	}
	if b, err = c.read("the address format", 4); err != nil {
		return rawAddr{}, err
	}
	name := rawAddr{format: addrFormat(binary.NativeEndian.Uint32(b))}
	if name.bytes, err = c.read("the address", int(n)); err != nil {
		return rawAddr{}, err
	}
	c.o.debugf("received name: format %d, %d bytes", name.format, n)
	return name, nil
}

// sync is pp_ctrl_sync, done before each size: the client sends "q", the
// server answers "a".
func (c *ctrl) sync(client bool) error {
	if client {
		if err := c.write("sync", ppMsgSyncQ); err != nil {
			return err
		}
		return c.expect("sync answer", ppMsgSyncA)
	}
	if err := c.expect("sync", ppMsgSyncQ); err != nil {
		return err
	}
	return c.write("sync answer", ppMsgSyncA)
}

// exchangeCount is pp_ctrl_txrx_msg_count, after each size: the client
// sends the number of messages it received, the server takes it as its
// own acknowledged count and answers "cnt ok". It returns that count.
func (c *ctrl) exchangeCount(client bool, received int64) (int64, error) {
	if client {
		s := strconv.FormatInt(received, 10)
		if len(s) > ppMsgLenCnt {
			return 0, fmt.Errorf("control: count %d does not fit %d bytes", received, ppMsgLenCnt)
		}
		b := make([]byte, ppMsgLenCnt) // NUL-padded
		copy(b, s)
		if err := c.write("message count", b); err != nil {
			return 0, err
		}
		return received, c.expect("count answer", ppMsgCheckCnt)
	}
	b, err := c.read("message count", ppMsgLenCnt)
	if err != nil {
		return 0, err
	}
	n, err := parseCount(b)
	if err != nil {
		return 0, err
	}
	return n, c.write("count answer", ppMsgCheckCnt)
}

// parseCount reads the count's field: decimal digits, then NULs.
func parseCount(b []byte) (int64, error) {
	digits := b
	if i := bytes.IndexByte(b, 0); i >= 0 {
		digits = b[:i]
		if len(bytes.Trim(b[i:], "\x00")) != 0 {
			digits = nil // bytes after the NUL padding
		}
	}
	n, err := strconv.ParseInt(string(digits), 10, 64)
	if err != nil || n < 0 || len(digits) == 0 || digits[0] == '+' {
		return 0, fmt.Errorf("control: bad message count %q: want decimal digits padded with NULs", b)
	}
	return n, nil
}
