package rxm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/cbuild"
)

// TestInteropRMA does RMA both ways between a fabricfs RDM endpoint and
// real libfabric's (tcp;ofi_rxm, testdata/rdm_rma.c, which describes the
// sequence): fi_write, fi_writedata, a delivery-complete write, an
// injected write and fi_read each way, over the one connection the C side
// opens.
func TestInteropRMA(t *testing.T) {
	bin := cbuild.Libfabric(t, "testdata/rdm_rma.c")
	p, d := testDomain(t)
	g := newRDM(t, p, d)
	const key = 0x600d
	mem := make([]byte, 16384)
	copy(mem[4000:], pattern(6, 1000))
	g.ev.Expose(key, mem, fi.REMOTE_READ|fi.REMOTE_WRITE)

	cmd := exec.Command(bin, fmt.Sprint(g.addr.IP.Port()), fmt.Sprint(key))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	out := bufio.NewReader(stdout)
	line := func(what string) string {
		t.Helper()
		l, err := out.ReadString('\n')
		if err != nil {
			io.Copy(io.Discard, out)
			cmd.Wait()
			exited = true
			t.Fatalf("%s: %v; C side: %s (async errors: %v)", what, err, stderr.String(), g.ev.errors())
		}
		return strings.TrimSpace(l)
	}

	var port uint16
	var ckey, base uint64
	if l := line("C address"); func() bool { _, err := fmt.Sscanf(l, "port %d key %d base %d", &port, &ckey, &base); return err != nil }() {
		t.Fatalf("C side printed %q", l)
	}
	peer := fi.Addr{Format: fi.SOCKADDR_IN, IP: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)}

	// The C side's operations on our region.
	if l := line("C's operations"); l != "c2go ok" {
		t.Fatalf("C side printed %q", l)
	}
	remote := cqFlagsRW(fi.REMOTE_WRITE)
	for i, want := range []core.Completion{
		{Flags: remote, Len: 1000},
		{Flags: remote | fi.CQFlags(fi.REMOTE_CQ_DATA), Len: 500, Data: 0x7777},
		{Flags: remote, Len: 300},
		{Flags: remote, Len: 32},
		{Flags: cqFlagsRW(fi.REMOTE_READ), Len: 1000},
	} {
		if c := g.remote(t, i); c != want {
			t.Errorf("remote event %d: %+v, want %+v", i, c, want)
		}
	}
	for _, w := range []struct{ off, seed, n int }{{0, 1, 1000}, {2000, 2, 500}, {3000, 4, 300}, {3500, 5, 32}} {
		if !bytes.Equal(mem[w.off:w.off+w.n], pattern(w.seed, w.n)) {
			t.Errorf("the C side's write of %d bytes at %d: our memory differs", w.n, w.off)
		}
	}

	// Ours on the C side's region.
	done := func(op *core.Op) {
		t.Helper()
		if c := g.waitFor(t, op); c.Err != 0 || c.Len != uint64(len(op.Buf)) || c.Flags != op.Kind.CQFlags() {
			t.Fatalf("completion %+v of kind %d (C side: %s)", c, op.Kind, stderr.String())
		}
	}
	done(g.rma(t, core.OpWrite, peer, pattern(7, 1000), base, ckey, 0, 0))
	rd := g.rma(t, core.OpRead, peer, make([]byte, 1000), base+8000, ckey, 0, 0)
	done(rd)
	if !bytes.Equal(rd.Buf, pattern(3, 1000)) {
		t.Errorf("read of the C side's region: the bytes differ")
	}
	done(g.rma(t, core.OpWrite, peer, pattern(9, 100), base+2000, ckey, fi.DELIVERY_COMPLETE, 0))
	done(g.rma(t, core.OpWrite, peer, pattern(8, 200), base+1000, ckey, fi.OpFlags(fi.REMOTE_CQ_DATA), 0x8888))
	if l := line("our operations"); !strings.HasPrefix(l, "go2c ok") {
		t.Fatalf("C side printed %q", l)
	} else {
		t.Logf("C side: %s", l)
	}
	stdin.Close()
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("C side: %v: %s", err, stderr.String())
	}
	if errs := g.ev.errors(); len(errs) > 0 {
		t.Errorf("async errors: %v", errs)
	}
}

// cqFlagsRW is FI_RMA with a remote access flag, as completion flags.
func cqFlagsRW(access fi.Caps) fi.CQFlags { return fi.CQFlags(fi.RMA | access) }
