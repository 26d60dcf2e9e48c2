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
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/atomic"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/cbuild"
	"github.com/fabricfs/fabricfs/providers/rxm/wire"
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
	cp := startC(t, g, bin, fmt.Sprint(g.addr.IP.Port()), fmt.Sprint(key))
	line := cp.line
	peer, ckey, base := cp.address()

	// The C side's operations on our region.
	if l := line("C's operations"); l != "c2go ok" {
		t.Fatalf("C side printed %q", l)
	}
	// Each report names the region the operation reached by its key.
	remote := cqFlagsRW(fi.REMOTE_WRITE)
	for i, want := range []core.Completion{
		{Flags: remote, Len: 1000, Key: key},
		{Flags: remote | fi.CQFlags(fi.REMOTE_CQ_DATA), Len: 500, Data: 0x7777, Key: key},
		{Flags: remote, Len: 300, Key: key},
		{Flags: remote, Len: 32, Key: key},
		{Flags: cqFlagsRW(fi.REMOTE_READ), Len: 1000, Key: key},
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
			t.Fatalf("completion %+v of kind %d (C side: %s)", c, op.Kind, cp.stderr.String())
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
	cp.finish()
}

// cPeer is a C program of testdata run against an RDM endpoint: its
// stdout is read line by line, its stdin closed to end it.
type cPeer struct {
	t      *testing.T
	g      *rdm
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
	exited bool
}

// startC runs bin with args; it is killed at cleanup if still running.
func startC(t *testing.T, g *rdm, bin string, args ...string) *cPeer {
	t.Helper()
	cp := &cPeer{t: t, g: g, cmd: exec.Command(bin, args...)}
	cp.cmd.Stderr = &cp.stderr
	var err error
	if cp.stdin, err = cp.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !cp.exited {
			cp.cmd.Process.Kill()
			cp.cmd.Wait()
		}
	})
	cp.out = bufio.NewReader(stdout)
	return cp
}

// line reads the program's next line; its end fails the test.
func (cp *cPeer) line(what string) string {
	cp.t.Helper()
	l, err := cp.out.ReadString('\n')
	if err != nil {
		io.Copy(io.Discard, cp.out)
		cp.cmd.Wait()
		cp.exited = true
		cp.t.Fatalf("%s: %v; C side: %s (async errors: %v)", what, err, cp.stderr.String(), cp.g.ev.errors())
	}
	return strings.TrimSpace(l)
}

// address reads the line "port P key K base B": the C endpoint's address
// and its region's key and base.
func (cp *cPeer) address() (fi.Addr, uint64, uint64) {
	cp.t.Helper()
	var port uint16
	var key, base uint64
	if l := cp.line("C address"); func() bool { _, err := fmt.Sscanf(l, "port %d key %d base %d", &port, &key, &base); return err != nil }() {
		cp.t.Fatalf("C side printed %q", l)
	}
	return fi.Addr{Format: fi.SOCKADDR_IN, IP: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)}, key, base
}

// finish closes the program's stdin and checks that it exits well, and
// that the endpoint had no asynchronous errors.
func (cp *cPeer) finish() {
	cp.t.Helper()
	cp.stdin.Close()
	err := cp.cmd.Wait()
	cp.exited = true
	if err != nil {
		cp.t.Fatalf("C side: %v: %s", err, cp.stderr.String())
	}
	if errs := cp.g.ev.errors(); len(errs) > 0 {
		cp.t.Errorf("async errors: %v", errs)
	}
}

// cqFlagsRW is FI_RMA with a remote access flag, as completion flags.
func cqFlagsRW(access fi.Caps) fi.CQFlags { return fi.CQFlags(fi.RMA | access) }

// TestInteropAtomics does every atomic pair rxm supports both ways between
// a fabricfs RDM endpoint and real libfabric's (tcp;ofi_rxm,
// testdata/rdm_atomic.c, which describes the sequence and computes the
// values with C's arithmetic), checking results and target memory, and a
// bad key each way: the initiator gets FI_EACCES, as libfabric's target
// answers it. It also checks that the domain answers fi_query_atomic as
// the library does, for every call, op and datatype.
func TestInteropAtomics(t *testing.T) {
	bin := cbuild.Libfabric(t, "testdata/rdm_atomic.c")
	p, d := testDomain(t)
	g := newRDM(t, p, d)
	const key, region, slot, elems = 0xa7, 16384, 32, 3
	mem := pattern(11, region)
	g.ev.Expose(key, mem, fi.REMOTE_READ|fi.REMOTE_WRITE)
	cp := startC(t, g, bin, fmt.Sprint(g.addr.IP.Port()), fmt.Sprint(key))

	// fi_query_atomic, ours against the library's.
	q := d.(core.Atomics)
	type pair struct {
		kind core.OpKind
		aop  fi.AtomicOp
		dt   fi.AtomicType
	}
	var pairs []pair
	for {
		l := cp.line("query")
		if l == "query end" {
			break
		}
		var call, aop, dt, ret int
		var count, size uint64
		if _, err := fmt.Sscanf(l, "query %d %d %d %d %d %d", &call, &aop, &dt, &ret, &count, &size); err != nil {
			t.Fatalf("C side printed %q", l)
		}
		kind := atomicOpKinds[call]
		gc, gs, err := q.QueryAtomic(fi.EP_RDM, kind, fi.AtomicType(dt), fi.AtomicOp(aop))
		switch {
		case ret == 0 && (err != nil || gc != count || gs != size):
			t.Errorf("query call %d op %d datatype %d: libfabric %d x %d bytes, ours %d x %d, %v", call, aop, dt, count, size, gc, gs, err)
		case ret != 0 && core.Code(err) != fi.Errno(-ret):
			t.Errorf("query call %d op %d datatype %d: libfabric %d, ours %v", call, aop, dt, ret, err)
		}
		if ret == 0 {
			pairs = append(pairs, pair{kind, fi.AtomicOp(aop), fi.AtomicType(dt)})
		}
	}
	peer, ckey, base := cp.address()

	// The C side's atomics on our region, then its read of it and a bad key.
	if l, want := cp.line("C's atomics"), fmt.Sprintf("c2go ok %d", len(pairs)); l != want {
		t.Fatalf("C side printed %q, want %q", l, want)
	}
	if l := cp.line("C's bad key"); l != "c2go eacces ok" {
		t.Fatalf("C side printed %q", l)
	}
	writes, reads := 0, 0
	for _, pr := range pairs {
		if pr.kind == core.OpAtomic {
			writes++
		} else {
			reads++
		}
	}
	counted := map[fi.CQFlags]int{}
	for i := range len(pairs) + 1 {
		counted[g.remote(t, i).Flags]++
	}
	if counted[fi.CQFlags(fi.ATOMIC|fi.REMOTE_WRITE)] != writes || counted[fi.CQFlags(fi.ATOMIC|fi.REMOTE_READ)] != reads ||
		counted[cqFlagsRW(fi.REMOTE_READ)] != 1 || g.numRemotes() != len(pairs)+1 {
		t.Errorf("remote events %v (%d), want %d atomic writes, %d atomic reads and the RMA read", counted, g.numRemotes(), writes, reads)
	}

	// Ours on the C side's region: every pair, then a bad key.
	cmem := pattern(12, region)
	for i, pr := range pairs {
		ak, _ := atomicKinds(pr.kind)
		size := atomic.Size(pr.dt)
		n := elems * size
		target := cmem[i*slot : i*slot+n]
		operand, cmp := pattern(100+i, n), []byte(nil)
		if pr.kind == core.OpCompareAtomic {
			cmp = pattern(200+i, n)
			copy(cmp[size:2*size], target[size:2*size])
		}
		if pr.aop == fi.ATOMIC_READ {
			operand = nil
		}
		op := g.atomicOp(pr.kind, peer, pr.dt, pr.aop, operand, cmp, n, base+uint64(i*slot), ckey)
		if err := g.ep.Post(op); err != nil {
			t.Fatalf("%v %v on %v: %v", ak, pr.aop, pr.dt, err)
		}
		if c := g.waitFor(t, op); c.Err != 0 || c.Flags != pr.kind.CQFlags() {
			t.Fatalf("%v %v on %v: completion %+v (C side: %s)", ak, pr.aop, pr.dt, c, cp.stderr.String())
		}
		if pr.kind != core.OpAtomic && !bytes.Equal(op.Result, target) {
			t.Errorf("%v %v on %v: result %x, want the C side's %x", ak, pr.aop, pr.dt, op.Result, target)
		}
	}
	if _, err := io.WriteString(cp.stdin, "check\n"); err != nil {
		t.Fatal(err)
	}
	if l, want := cp.line("our atomics"), fmt.Sprintf("go2c ok %d", len(pairs)); l != want {
		t.Fatalf("C side printed %q, want %q", l, want)
	}
	op := g.atomicOp(core.OpAtomic, peer, fi.UINT64, fi.SUM, make([]byte, 8), nil, 0, base, ckey+0x1000)
	if err := g.ep.Post(op); err != nil {
		t.Fatal(err)
	}
	if c := g.waitFor(t, op); c.Err != fi.EACCES {
		t.Errorf("fi_atomic with a key the C side does not have: completion %+v, want FI_EACCES", c)
	}
	cp.finish()
}

// TestInteropSAR receives segmented messages from real libfabric's
// tcp;ofi_rxm with its dynamic receive buffers off
// (FI_OFI_RXM_ENABLE_DYN_RBUF=0; testdata/rdm_sar.c, which describes the
// sequence): 16385, 65536 and 131072 bytes (rxm's SAR limit), untagged and
// tagged, without and with remote CQ data. The C sends complete before any
// receive is posted here, which a rendezvous could not do, so they came as
// segments; each is then held whole as unexpected, and every receive gets
// its bytes, tag, data and source (one, shorter, FI_ETRUNC). Above the SAR
// limit (131073 bytes) the C side uses the rendezvous; the C side's
// receive of our answer shows the connection is still up.
func TestInteropSAR(t *testing.T) {
	bin := cbuild.Libfabric(t, "testdata/rdm_sar.c")
	p, d := testDomain(t)
	g := newRDM(t, p, d)
	cp := startC(t, g, bin, fmt.Sprint(g.addr.IP.Port()))
	peer, _, _ := cp.address()
	src := fi.SockAddr(peer.IP)

	type sent struct {
		m    sarMsg
		kind core.OpKind
	}
	var msgs []sent
	total := 0
	for _, n := range []int{16385, 65536, 131072} {
		for _, tagged := range []bool{false, true} {
			for _, withData := range []bool{false, true} {
				i := len(msgs) + 1
				s := sent{m: sarMsg{body: pattern(i, n)}, kind: core.OpRecv}
				if tagged {
					s.m.op, s.m.tag, s.kind = wire.OpTagged, uint64(0x100+i), core.OpTRecv
				}
				if withData {
					s.m.flags, s.m.data = wire.FlagRemoteCQData, uint64(0xda7a0000+i)
				}
				msgs = append(msgs, s)
				total += n
			}
		}
	}
	if l, want := cp.line("C's segmented sends"), fmt.Sprintf("sent %d", len(msgs)); l != want {
		t.Fatalf("C side printed %q, want %q", l, want)
	}
	deadline := time.Now().Add(waitTime)
	for {
		if rc, n := sarState(g); rc == 0 && n == total {
			break
		}
		if time.Now().After(deadline) {
			rc, n := sarState(g)
			t.Fatalf("%d messages being received, %d unexpected bytes; want 0 and %d (async errors: %v)", rc, n, total, g.ev.errors())
		}
		time.Sleep(time.Millisecond)
	}
	for i, s := range msgs {
		room := len(s.m.body) + 10
		if i == 2 { // 65536 bytes untagged, no data: a short receive
			room = 1000
		}
		op := g.recv(t, s.kind, room, s.m.tag, 0)
		c := g.waitFor(t, op)
		if i == 2 {
			if c.Err != fi.ETRUNC || c.Len != 1000 || c.OLen != uint64(len(s.m.body)-1000) || !bytes.Equal(op.Buf, s.m.body[:1000]) {
				t.Errorf("short receive of message %d: %+v, want FI_ETRUNC, len 1000, olen %d", i+1, c, len(s.m.body)-1000)
			}
			continue
		}
		wantSAR(t, op, c, s.m, src)
	}

	// Above the SAR limit: rendezvous.
	n := len(msgs)
	big := []*core.Op{g.recv(t, core.OpRecv, 131073, 0, 0), g.recv(t, core.OpTRecv, 131073, uint64(0x100+n+2), 0)}
	if _, err := io.WriteString(cp.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	got := takeAll(t, g, big...)
	wantSAR(t, big[0], got[big[0]], sarMsg{body: pattern(n+1, 131073)}, src)
	wantSAR(t, big[1], got[big[1]], sarMsg{op: wire.OpTagged, tag: uint64(0x100 + n + 2), body: pattern(n+2, 131073)}, src)
	ack := g.send(t, core.OpSend, peer, []byte(fmt.Sprintf("ack %d", n+2)), 0)
	if c := g.waitFor(t, ack); c.Err != 0 {
		t.Fatalf("ack: %+v", c)
	}
	if l := cp.line("C's ack"); l != "ok" {
		t.Fatalf("C side printed %q", l)
	}
	cp.finish()
}
