package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/cbuild"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

// startC runs the C peer; its exit status arrives on the channel.
func startC(t *testing.T, bin string, args ...string) (*exec.Cmd, *bufio.Reader, chan error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exit := make(chan error, 1)
	br := bufio.NewReader(stdout)
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, stderr.String())
		}
		exit <- err
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, br, exit
}

// startCServer runs the C peer in a listening mode and returns the port it
// prints.
func startCServer(t *testing.T, bin, mode string) (int, chan error) {
	t.Helper()
	_, out, exit := startC(t, bin, mode)
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("C %s: %v; %v", mode, err, <-exit)
	}
	var port int
	if _, err := fmt.Sscanf(line, "port %d", &port); err != nil {
		t.Fatalf("C %s said %q", mode, line)
	}
	return port, exit
}

func waitExit(t *testing.T, exit chan error) {
	t.Helper()
	select {
	case err := <-exit:
		if err != nil {
			t.Fatalf("C peer failed: %v", err)
		}
	case <-time.After(waitTime):
		t.Fatalf("C peer did not exit")
	}
}

// TestInterop runs testdata/interop.c, a C program linked with libfabric
// 1.17, against fabricfs endpoints in both roles. Each side sends one
// message with remote CQ data asking for delivery complete, so each also
// checks the other's ACK.
func TestInterop(t *testing.T) {
	bin := cbuild.Libfabric(t, "testdata/interop.c")
	t.Run("CClient", func(t *testing.T) { interopCClient(t, bin) })
	t.Run("CServer", func(t *testing.T) { interopCServer(t, bin) })
	t.Run("RMA", func(t *testing.T) { interopRMA(t, bin) })
	t.Run("Reject", func(t *testing.T) { interopReject(t, bin) })
	t.Run("AuthKey", func(t *testing.T) { interopAuthKey(t, bin) })
}

// interopAuthKey: libfabric's tcp has no authorization keys, and "Only peer
// endpoints that are programmed to use the same authorization key may
// communicate" (fi_endpoint(3)): a fabricfs listener with a key refuses the
// C program's request itself (FI_ECONNREFUSED without data there, no
// request here), and a fabricfs endpoint with a key refuses the C
// program's accept (ECONNREFUSED).
func interopAuthKey(t *testing.T, bin string) {
	d, info := loDomain()
	info = info.Clone()
	info.EPAttr.AuthKey, info.EPAttr.AuthKeySize = []byte("job-1"), 5
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	_, _, exit := startC(t, bin, "refused", "127.0.0.1", fmt.Sprint(addr.IP.Port()))
	waitExit(t, exit)
	select {
	case r := <-pev.Reqs:
		t.Errorf("a request without the key reached the listener: %q", r.Data())
	default:
	}

	port, _ := startCServer(t, bin, "server")
	cli := dial(t, d, info, addrOf(fmt.Sprintf("127.0.0.1:%d", port)), []byte("hello from Go"))
	defer cli.ep.Close()
	if f := cli.ev.WaitFailed(t); !errors.Is(f.Err, fi.ECONNREFUSED) {
		t.Errorf("connect with a key to libfabric's tcp: %v, want ECONNREFUSED", f.Err)
	}
}

// interopReject: fabricfs rejects the C program's request with private
// data, which the C side gets as FI_ECONNREFUSED with that data; then the
// C program rejects fabricfs's request, which fails with ECONNREFUSED and
// the C side's data.
func interopReject(t *testing.T, bin string) {
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	_, _, exit := startC(t, bin, "rejected", "127.0.0.1", fmt.Sprint(addr.IP.Port()))
	req := pev.WaitReq(t)
	if string(req.Data()) != "may I?" {
		t.Errorf("connreq data %q", req.Data())
	}
	e, err := d.NewEndpoint(req.Info(), req, provtest.NewEPEvents())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Reject([]byte("no thanks")); err != nil {
		t.Fatal(err)
	}
	waitExit(t, exit)

	port, exit := startCServer(t, bin, "rejecter")
	cli := dial(t, d, info, addrOf(fmt.Sprintf("127.0.0.1:%d", port)), []byte("hello from Go"))
	defer cli.ep.Close()
	f := cli.ev.WaitFailed(t)
	if !errors.Is(f.Err, fi.ECONNREFUSED) || string(f.Data) != "go away" {
		t.Errorf("rejected with %v, data %q; want ECONNREFUSED, \"go away\"", f.Err, f.Data)
	}
	waitExit(t, exit)
}

// interopRMA: fabricfs connects to the C program, writes into and reads
// from the C side's registered memory (the C side checks the write), then
// the C side does fi_writedata, fi_writemsg with FI_DELIVERY_COMPLETE and
// fi_read against memory fabricfs exposes, and fi_senddata.
func interopRMA(t *testing.T, bin string) {
	port, exit := startCServer(t, bin, "rma")
	d, info := loDomain()
	cli := dial(t, d, info, addrOf(fmt.Sprintf("127.0.0.1:%d", port)), nil)
	defer cli.ep.Close()
	region := []byte("GOREGION" + strings.Repeat(".", 56))
	cli.ev.Expose(0x60, region, fi.REMOTE_READ|fi.REMOTE_WRITE)
	rbuf := make([]byte, 16)
	post(t, cli.ep, &core.Op{Kind: core.OpRecv, Buf: rbuf, Context: 1})
	cli.ev.WaitConnected(t)

	post(t, cli.ep, &core.Op{Kind: core.OpWrite, Buf: []byte("written by Go"), Addr: 100, Key: 0xC0DE, Flags: fi.DELIVERY_COMPLETE, Context: 2})
	got := make([]byte, 26)
	post(t, cli.ep, &core.Op{Kind: core.OpRead, Buf: got, Addr: 26, Key: 0xC0DE, Context: 3})
	for range 2 {
		if dn := waitDone(t, cli.done); dn.c.Err != 0 {
			t.Fatalf("RMA completion %+v", dn.c)
		}
	}
	if string(got) != "abcdefghijklmnopqrstuvwxyz" {
		t.Errorf("read %q from the C side", got)
	}
	post(t, cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte("go done"), Context: 4})
	for i := 0; i < 2; {
		dn := waitDone(t, cli.done)
		switch {
		case dn.c.Err != 0:
			t.Fatalf("completion %+v", dn.c)
		case dn.op.Context == 1:
			if string(rbuf[:dn.c.Len]) != "bye" || dn.c.Data != 0x42 || dn.c.Flags&fi.CQFlags(fi.REMOTE_CQ_DATA) == 0 {
				t.Errorf("received %+v %q", dn.c, rbuf[:dn.c.Len])
			}
			i++
		case dn.op.Context == 4:
			i++
		}
	}
	var writes, reads int
	for writes+reads < 3 {
		select {
		case c := <-cli.ev.RemoteCh:
			switch {
			case c.Flags == fi.CQFlags(fi.RMA|fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA) && c.Data == 0x77 && c.Len == 6,
				c.Flags == fi.CQFlags(fi.RMA|fi.REMOTE_WRITE) && c.Len == 2:
				writes++
			case c.Flags == fi.CQFlags(fi.RMA|fi.REMOTE_READ) && c.Len == 8:
				reads++
			default:
				t.Fatalf("remote event %+v", c)
			}
		case <-time.After(waitTime):
			t.Fatalf("%d remote writes and %d reads reported, want 2 and 1", writes, reads)
		}
	}
	if string(region[8:14]) != "from C" || string(region[32:34]) != "dc" {
		t.Errorf("region after the C side's writes: %q", region)
	}
	if err := cli.ep.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cli.ev.WaitShutdown(t)
	waitExit(t, exit)
}

// interopCClient: the C program connects to a fabricfs passive endpoint.
func interopCClient(t *testing.T, bin string) {
	d, info := loDomain()
	pep, pev := listen(t, d, info)
	defer pep.Close()
	addr, _ := pep.Name()
	_, _, exit := startC(t, bin, "client", "127.0.0.1", fmt.Sprint(addr.IP.Port()))

	var req core.ConnReq
	select {
	case req = <-pev.Reqs:
	case err := <-exit:
		t.Fatalf("C client exited before connecting: %v", err)
	case <-time.After(waitTime):
		t.Fatal("no connection request from the C client")
	}
	if string(req.Data()) != "hello from C" {
		t.Errorf("connreq data %q", req.Data())
	}
	ev := provtest.NewEPEvents()
	e, err := d.NewEndpoint(req.Info(), req, ev)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	dones := completions(e, 16)
	e.Enable()
	rbuf := make([]byte, 64)
	post(t, e, &core.Op{Kind: core.OpRecv, Buf: rbuf})
	if err := e.Accept([]byte("hello from Go")); err != nil {
		t.Fatal(err)
	}
	ev.WaitConnected(t)
	dn := waitDone(t, dones)
	if dn.c.Err != 0 || string(rbuf[:dn.c.Len]) != "ping from C" || dn.c.Data != 0x1234 || dn.c.Flags&fi.CQFlags(fi.REMOTE_CQ_DATA) == 0 {
		t.Errorf("received %+v %q", dn.c, rbuf[:dn.c.Len])
	}
	post(t, e, &core.Op{Kind: core.OpSend, Buf: []byte("pong from Go"), Data: 0x5678,
		Flags: fi.DELIVERY_COMPLETE | fi.OpFlags(fi.REMOTE_CQ_DATA)})
	if dn := waitDone(t, dones); dn.c.Err != 0 || dn.c.Flags != fi.CQFlags(fi.MSG|fi.SEND) {
		t.Errorf("send completion (the C side's ACK) %+v", dn.c)
	}
	ev.WaitShutdown(t) // the C client's fi_shutdown
	waitExit(t, exit)
}

// interopCServer: fabricfs connects to the C program's passive endpoint.
func interopCServer(t *testing.T, bin string) {
	port, exit := startCServer(t, bin, "server")
	d, info := loDomain()
	cli := dial(t, d, info, addrOf(fmt.Sprintf("127.0.0.1:%d", port)), []byte("hello from Go"))
	defer cli.ep.Close()
	rbuf := make([]byte, 64)
	post(t, cli.ep, &core.Op{Kind: core.OpRecv, Buf: rbuf})
	if got := cli.ev.WaitConnected(t); string(got) != "hello from C" {
		t.Errorf("accept data %q", got)
	}
	post(t, cli.ep, &core.Op{Kind: core.OpSend, Buf: []byte("ping from Go"), Data: 0x5678,
		Flags: fi.TRANSMIT_COMPLETE | fi.OpFlags(fi.REMOTE_CQ_DATA)})
	for range 2 {
		dn := waitDone(t, cli.done)
		switch {
		case dn.c.Err != 0:
			t.Errorf("completion %+v", dn.c)
		case dn.op.Kind == core.OpRecv && (string(rbuf[:dn.c.Len]) != "pong from C" || dn.c.Data != 0x9abc):
			t.Errorf("received %+v %q", dn.c, rbuf[:dn.c.Len])
		}
	}
	if err := cli.ep.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cli.ev.WaitShutdown(t)
	waitExit(t, exit)
}
