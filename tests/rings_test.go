package tests

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/internal/testcpu"
)

// ringPair is two connected endpoints with a CQ and a memory region each,
// made through the tree with clients/go/fabricfs.
type ringPair struct {
	a, b     *fabricfs.EP
	cqA, cqB *fabricfs.CQ
	mrA, mrB *fabricfs.MR
}

func newRingPair(t *testing.T, d *daemon, mrLen int) *ringPair {
	t.Helper()
	return newRingPairWith(t, d, mrLen, nil, nil)
}

// newRingPairWith is newRingPair with beforeA and beforeB, if not nil, run
// on each endpoint before it is bound and enabled.
func newRingPairWith(t *testing.T, d *daemon, mrLen int, beforeA, beforeB func(*fabricfs.EP) error) *ringPair {
	t.Helper()
	tree := d.tree(t)
	dom := tree.Domain("tcp", "lo")
	eq, err := dom.NewEQ()
	if err != nil {
		t.Fatal(err)
	}
	p := &ringPair{}
	if p.cqA, err = dom.NewCQ(4096); err != nil {
		t.Fatal(err)
	}
	if p.cqB, err = dom.NewCQ(4096); err != nil {
		t.Fatal(err)
	}
	setup := func(before func(*fabricfs.EP) error, cq *fabricfs.CQ) func(*fabricfs.EP) error {
		return func(e *fabricfs.EP) error {
			if before != nil {
				if err := before(e); err != nil {
					return err
				}
			}
			return e.Setup(eq, cq)
		}
	}
	a, b, pep, err := dom.ConnectWith(eq, setup(beforeA, p.cqA), setup(beforeB, p.cqB))
	if err != nil {
		t.Fatal(err)
	}
	p.a, p.b = a, b
	if p.mrA, err = dom.NewMR(mrLen, "FI_SEND,FI_RECV"); err != nil {
		t.Fatal(err)
	}
	if p.mrB, err = dom.NewMR(mrLen, "FI_SEND,FI_RECV"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range []interface{ Close() error }{p.mrA, p.mrB, a, pep, p.cqA, p.cqB, eq} {
			c.Close()
		}
	})
	return p
}

// msgPattern is the content source: message i is msgPattern[i%251:][:size].
var msgPattern = func() []byte {
	b := make([]byte, 1<<17)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}()

var mixedSizes = []uint64{1, 8, 33, 64, 127, 256, 512, 1000, 2048, 4096, 0, 9000}

func message(i uint64) []byte {
	size := mixedSizes[i%uint64(len(mixedSizes))]
	m := msgPattern[i%251:][:size]
	return m
}

// TestMillionMessages streams 1,000,000 messages of mixed sizes from A to B
// through the rings (thousands of wrap-arounds of every ring) and checks at
// the receiver that each arrives once, in order, with its content.
func TestMillionMessages(t *testing.T) {
	n := uint64(1_000_000)
	if testing.Short() {
		n = 50_000
	}
	d := mount(t)
	const window, slot = 64, 16384
	p := newRingPair(t, d, window*slot)
	var sent, sendDone, posted, recvd uint64
	start := time.Now()
	deadline := start.Add(8 * time.Minute)
	for recvd < n {
		progress := false
		for posted < n && posted-recvd < window {
			off := (posted % window) * slot
			if err := p.b.PostRecv(p.mrB, off, slot, posted, 0); err != nil {
				if errors.Is(err, syscall.EAGAIN) {
					break
				}
				t.Fatal(err)
			}
			posted++
			progress = true
		}
		for sent < n && sent-sendDone < window {
			m := message(sent)
			off := (sent % window) * slot
			copy(p.mrA.Mem()[off:], m)
			if len(m) >= 8 {
				binary.LittleEndian.PutUint64(p.mrA.Mem()[off:], sent)
			}
			if err := p.a.PostSend(p.mrA, off, uint64(len(m)), sent, 0); err != nil {
				if errors.Is(err, syscall.EAGAIN) {
					break
				}
				t.Fatal(err)
			}
			sent++
			progress = true
		}
		for _, c := range p.cqA.Poll(window) {
			if c.Err != 0 || c.Context != sendDone {
				t.Fatalf("send completion %+v, want context %d and no error", c, sendDone)
			}
			sendDone++
			progress = true
		}
		for _, c := range p.cqB.Poll(window) {
			want := message(recvd)
			if c.Err != 0 || c.Context != recvd || c.Len != uint64(len(want)) || c.Buf != (recvd%window)*slot {
				t.Fatalf("receive completion %+v, want context %d, %d bytes at %d", c, recvd, len(want), (recvd%window)*slot)
			}
			got := p.mrB.Mem()[c.Buf : c.Buf+c.Len]
			if len(want) >= 8 {
				if seq := binary.LittleEndian.Uint64(got); seq != recvd {
					t.Fatalf("message %d carries sequence %d", recvd, seq)
				}
				got, want = got[8:], want[8:]
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("message %d: content differs", recvd)
			}
			recvd++
			progress = true
		}
		if !progress {
			if time.Now().After(deadline) {
				t.Fatalf("stuck after %d sent, %d received", sent, recvd)
			}
			p.cqB.Wait(10 * time.Millisecond)
		}
	}
	el := time.Since(start)
	t.Logf("%d messages in %v (%.0f ns/message)", n, el, float64(el.Nanoseconds())/float64(n))
}

// TestTruncatedReceive: a message longer than the posted buffer completes
// with -FI_ETRUNC in the completion, the buffer holds its start, and the
// next message arrives intact.
func TestTruncatedReceive(t *testing.T) {
	d := mount(t)
	p := newRingPair(t, d, 4096)
	copy(p.mrA.Mem(), msgPattern[:200])
	must(t, p.b.PostRecv(p.mrB, 0, 10, 1, 0))
	must(t, p.b.PostRecv(p.mrB, 100, 100, 2, 0))
	must(t, p.a.PostSend(p.mrA, 0, 100, 11, 0))
	must(t, p.a.PostSend(p.mrA, 100, 50, 12, 0))
	cs := pollN(t, p.cqB, 2)
	const etrunc = 265
	if c := cs[0]; c.Context != 1 || c.Err != -etrunc || c.Len != 10 || c.OLen != 90 {
		t.Errorf("truncated receive: %+v, want err -%d len 10 olen 90", c, etrunc)
	}
	if !bytes.Equal(p.mrB.Mem()[:10], msgPattern[:10]) {
		t.Errorf("truncated buffer holds %q", p.mrB.Mem()[:10])
	}
	if c := cs[1]; c.Context != 2 || c.Err != 0 || c.Len != 50 || !bytes.Equal(p.mrB.Mem()[100:150], msgPattern[100:150]) {
		t.Errorf("message after the truncated one: %+v", c)
	}
	// A malformed request is an error completion too, with its context.
	must(t, p.b.PostRecv(p.mrB, 4000, 200, 3, 0)) // past the end of the region
	if c := pollN(t, p.cqB, 1)[0]; c.Context != 3 || c.Err != -int32(syscall.EINVAL) {
		t.Errorf("out-of-bounds request: %+v, want -EINVAL", c)
	}
}

// TestCountersOnRings: counters bound to the endpoints count completions of
// ring requests: sends under a selective CQ binding, with FI_COMPLETION
// (a CQ entry) and without (none, but counted); a truncated receive
// (FI_ETRUNC) and a malformed request in the error counts; and a waiter on
// a counter wakes when the completions reach its threshold.
func TestCountersOnRings(t *testing.T) {
	d := mount(t)
	tree := d.tree(t)
	dom := tree.Domain("tcp", "lo")
	eq, err := dom.NewEQ()
	must(t, err)
	t.Cleanup(func() { eq.Close() })
	var cqA, cqB *fabricfs.CQ
	var sent, recvd *fabricfs.Cntr
	for _, q := range []**fabricfs.CQ{&cqA, &cqB} {
		*q, err = dom.NewCQ(0)
		must(t, err)
		t.Cleanup(func() { (*q).Close() })
	}
	for _, c := range []**fabricfs.Cntr{&sent, &recvd} {
		*c, err = dom.NewCntr()
		must(t, err)
		t.Cleanup(func() { (*c).Close() })
	}
	setup := func(binds ...string) func(*fabricfs.EP) error {
		return func(e *fabricfs.EP) error {
			for _, c := range append(append([]string{"bind eq " + eq.ID()}, binds...), "enable") {
				if err := e.Ctl(c); err != nil {
					return err
				}
			}
			return nil
		}
	}
	a, b, pep, err := dom.ConnectWith(eq,
		setup("bind cq "+cqA.ID()+" send,recv,selective", "bind cntr "+sent.ID()+" send"),
		setup("bind cq "+cqB.ID()+" send,recv", "bind cntr "+recvd.ID()+" recv"))
	must(t, err)
	t.Cleanup(func() { a.Close(); pep.Close() })
	mrA, err := dom.NewMR(4096, "FI_SEND")
	must(t, err)
	t.Cleanup(func() { mrA.Close() })
	mrB, err := dom.NewMR(4096, "FI_RECV")
	must(t, err)
	t.Cleanup(func() { mrB.Close() })

	waited := make(chan error, 1)
	go func() { waited <- sent.Wait(3, 10*time.Second) }()
	copy(mrA.Mem(), msgPattern[:200])
	must(t, b.PostRecv(mrB, 0, 10, 1, 0)) // the first message does not fit
	must(t, b.PostRecv(mrB, 100, 100, 2, 0))
	must(t, b.PostRecv(mrB, 200, 100, 3, 0))
	must(t, a.PostSend(mrA, 0, 100, 11, 0))
	must(t, a.PostSend(mrA, 100, 50, 12, uint64(fi.COMPLETION)))
	must(t, a.PostSend(mrA, 150, 50, 13, 0))
	if err := <-waited; err != nil {
		t.Fatalf("waiting for 3 sends: %v", err)
	}
	wantCounts(t, sent, 3, 0)
	// The counter counts after the CQ entry is posted: the entry is there.
	if cs := cqA.Poll(10); len(cs) != 1 || cs[0].Context != 12 || cs[0].Err != 0 {
		t.Errorf("send completions under a selective binding: %+v, want the one with FI_COMPLETION (context 12)", cs)
	}
	const etrunc = 265
	cs := pollN(t, cqB, 3)
	if cs[0].Context != 1 || cs[0].Err != -etrunc || cs[1].Err != 0 || cs[2].Err != 0 {
		t.Errorf("receive completions: %+v, want FI_ETRUNC then two successes", cs)
	}
	wantCounts(t, recvd, 2, 1)

	// A request the daemon rejects is a send completed in error: on the CQ
	// despite the selective binding, and in the send counter's errors.
	must(t, a.PostSend(mrA, 4000, 200, 14, 0)) // past the end of the region
	if c := pollN(t, cqA, 1)[0]; c.Context != 14 || c.Err != -int32(syscall.EINVAL) {
		t.Errorf("out-of-bounds request: %+v, want -EINVAL", c)
	}
	wantCounts(t, sent, 3, 1)
	wantCounts(t, recvd, 2, 1)
}

// wantCounts waits up to 10s for a counter to show value and errs.
func wantCounts(t *testing.T, c *fabricfs.Cntr, value, errs uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		v, e, err := c.Read()
		must(t, err)
		if v == value && e == errs {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: value %d errors %d, want %d and %d", c.Name(), v, e, value, errs)
		}
	}
}

// TestFullRing: with no receive posted at B, A's sends back up into its tx
// ring until PostSend reports EAGAIN; once B receives, every message
// arrives exactly once, in order.
func TestFullRing(t *testing.T) {
	d := mount(t)
	const size = 1 << 16
	p := newRingPair(t, d, 8*size)
	for i := range p.mrA.Mem() {
		p.mrA.Mem()[i] = byte(i / size)
	}
	sent := uint64(0)
	full := false
	for deadline := time.Now().Add(20 * time.Second); !full; {
		err := p.a.PostSend(p.mrA, (sent%8)*size, size, sent, 0)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			full = true
		case err != nil:
			t.Fatal(err)
		default:
			sent++
		}
		if time.Now().After(deadline) {
			t.Fatalf("tx ring never filled after %d sends", sent)
		}
	}
	t.Logf("tx ring full after %d sends", sent)
	recvd, sendDone := uint64(0), uint64(0)
	for recvd < sent {
		for posted := recvd; posted < sent && posted < recvd+8; posted++ {
			must(t, p.b.PostRecv(p.mrB, (posted%8)*size, size, posted, 0))
		}
		for _, c := range pollN(t, p.cqB, min(8, int(sent-recvd))) {
			if c.Err != 0 || c.Context != recvd || c.Len != size || p.mrB.Mem()[c.Buf] != byte(recvd%8) {
				t.Fatalf("receive %d: %+v", recvd, c)
			}
			recvd++
		}
		sendDone += uint64(len(p.cqA.Poll(1024)))
	}
	for deadline := time.Now().Add(10 * time.Second); sendDone < sent && time.Now().Before(deadline); {
		sendDone += uint64(len(p.cqA.Poll(1024)))
	}
	if sendDone != sent {
		t.Errorf("%d of %d sends completed", sendDone, sent)
	}
	if extra := p.cqB.Poll(10); len(extra) != 0 {
		t.Errorf("extra completions at B: %+v", extra)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pollN waits for n completions on cq.
func pollN(t *testing.T, cq *fabricfs.CQ, n int) []ring.CQE {
	t.Helper()
	var out []ring.CQE
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		out = append(out, cq.Poll(n-len(out))...)
		if len(out) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after 10s: %+v", len(out), n, out)
			}
			cq.Wait(100 * time.Millisecond)
		}
	}
	return out
}

// TestIdleEndpoints enables 1,000 endpoints, each with its two rings served
// by the daemon (made by an open of tx, which makes both), and checks that
// the idle daemon runs fewer than 64 threads and uses under 1% of a CPU.
func TestIdleEndpoints(t *testing.T) {
	d := mount(t)
	pid := d.cmd.Process.Pid
	D := d.path("tcp", "lo")
	for _, p := range []string{"eq/e", "cq/c"} {
		if err := os.Mkdir(filepath.Join(D, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const n = 1000
	for i := 0; i < n; i++ {
		ep := filepath.Join(D, "ep", fmt.Sprintf("e%d", i))
		if err := os.Mkdir(ep, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable"} {
			if err := ctl(filepath.Join(ep, "ctl"), c); err != nil {
				t.Fatalf("ep %d: %s: %v", i, c, err)
			}
		}
		f, err := os.OpenFile(filepath.Join(ep, "tx"), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("ep %d: open tx: %v", i, err)
		}
		f.Close()
	}
	// The opens made the rings, a memfd each, which the daemon does not
	// keep open (passthrough, as root); their 2,000 queues are 16 engine
	// groups, asleep in the sleeper's one thread (core/sleeper).
	if fds := procFDs(t, pid); os.Geteuid() == 0 && fds >= n/10 {
		t.Errorf("the daemon holds %d descriptors for %d endpoints' rings; want no memfd kept", fds, n)
	}
	time.Sleep(500 * time.Millisecond) // let the engine go to sleep
	t0, c0 := time.Now(), cpuTicks(t, fmt.Sprintf("/proc/%d", pid))
	time.Sleep(3 * time.Second)
	ticks, el := cpuTicks(t, fmt.Sprintf("/proc/%d", pid))-c0, time.Since(t0)
	threads := procThreads(t, pid)
	cpu := float64(ticks) / 100 / el.Seconds() // USER_HZ is 100
	t.Logf("%d idle endpoints: %d threads, %.2f%% CPU (%d ticks in %v)", n, threads, cpu*100, ticks, el)
	if threads >= 64 {
		t.Errorf("daemon runs %d threads with %d idle endpoints, want < 64", threads, n)
	}
	if cpu >= 0.01 {
		t.Errorf("idle daemon uses %.2f%% CPU, want < 1%%", cpu*100)
	}
}

// cpuTicks is utime+stime in clock ticks of the process or thread whose
// /proc directory is dir (/proc/PID, /proc/PID/task/TID).
func cpuTicks(t *testing.T, dir string) int64 {
	n, err := statTicks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// statTicks is the user and system CPU time of the process or thread dir
// (/proc/PID or /proc/PID/task/TID), in clock ticks.
func statTicks(dir string) (int64, error) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

// procFDs is the number of descriptors process pid holds.
func procFDs(t *testing.T, pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func procThreads(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads: in status")
	return 0
}

// TestRMAOnRings: RMA through the rings between two endpoints of the tree.
// A writes into B's region by its key (offset addressing), once with
// remote CQ data, which makes an FI_REMOTE_WRITE entry on B's CQ, then
// reads it back; a region registered without FI_REMOTE_WRITE is refused.
func TestRMAOnRings(t *testing.T) {
	d := mount(t)
	p := newRingPair(t, d, 4096)
	tree := d.tree(t)
	target, err := tree.Domain("tcp", "lo").NewMR(4096, "FI_REMOTE_READ,FI_REMOTE_WRITE")
	must(t, err)
	t.Cleanup(func() { target.Close() })
	keyText, err := target.Attr("key")
	must(t, err)
	key, err := strconv.ParseUint(strings.TrimSpace(keyText), 0, 64)
	must(t, err)

	copy(p.mrA.Mem(), msgPattern[:300])
	const fiRemoteCQData, fiRMA, fiWrite, fiRead, fiRemoteWrite = 1 << 17, 1 << 2, 1 << 9, 1 << 8, 1 << 13
	must(t, p.a.Post(p.mrA, ring.WR{Op: ring.OpWrite, Context: 1, Desc: p.mrA.Desc(), Offset: 0, Len: 100,
		RMAAddr: 1000, RMAKey: key}))
	must(t, p.a.Post(p.mrA, ring.WR{Op: ring.OpWrite, Flags: fiRemoteCQData, Data: 0xfeed, Context: 2, Desc: p.mrA.Desc(),
		Offset: 100, Len: 200, RMAAddr: 1100, RMAKey: key}))
	must(t, p.a.Post(p.mrA, ring.WR{Op: ring.OpRead, Context: 3, Desc: p.mrA.Desc(), Offset: 2000, Len: 300,
		RMAAddr: 1000, RMAKey: key}))
	cs := pollN(t, p.cqA, 3)
	for i, c := range cs {
		want := uint64(fiRMA | fiWrite)
		if i == 2 {
			want = fiRMA | fiRead
		}
		if c.Err != 0 || c.Context != uint64(i+1) || c.Flags != want {
			t.Errorf("completion %d: %+v, want flags %#x", i, c, want)
		}
	}
	if !bytes.Equal(target.Mem()[1000:1300], msgPattern[:300]) || !bytes.Equal(p.mrA.Mem()[2000:2300], msgPattern[:300]) {
		t.Error("written or read bytes differ")
	}
	if c := pollN(t, p.cqB, 1)[0]; c.Flags != fiRemoteWrite|fiRemoteCQData || c.Data != 0xfeed || c.Err != 0 {
		t.Errorf("remote CQ data entry on the target: %+v", c)
	}
}

// TestEngineCPUs: with -engine-cpus the thread of the engine group serving
// two endpoints' rings may run only on the CPU given, the daemon's other
// threads anywhere they could before, and messages still go through; bad
// lists are refused before mounting. Every few milliseconds the busy worker
// passes through the Go scheduler unlocked and may come back on another
// thread: it lets go of the pin before and pins the thread it comes back on
// after, so no two threads are pinned at once.
func TestEngineCPUs(t *testing.T) {
	_, cpus := testcpu.Two(t)
	d := mountWith(t, "-engine-cpus", strconv.Itoa(cpus[0]))
	p := newRingPair(t, d, 4096)
	pingPongPinned(t, d, p, cpus[:1])

	for _, bad := range []string{"x", "1-0", "0,", "-1", fmt.Sprint(runtime.NumCPU() + 64)} {
		out, err := exec.Command(daemonBin, "-verbs-addrs", "none", "-engine-cpus", bad, t.TempDir()).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "-engine-cpus") {
			t.Errorf("fabricfs -engine-cpus %q: %v, %q; want it refused", bad, err, out)
		}
	}
}

// TestEngineCPUPerEndpoint: attr/engine_cpu places an endpoint's rings in
// an engine group of their own CPU. Two endpoints on two CPUs are served by
// two threads, each pinned to its endpoint's CPU, while the daemon's other
// threads keep the process's CPUs; the attribute reads back, takes -1 or a
// CPU the daemon may run on, and is fixed once the endpoint is enabled.
func TestEngineCPUPerEndpoint(t *testing.T) {
	_, cpus := testcpu.Two(t)
	d := mount(t)
	e, err := d.tree(t).Domain("tcp", "lo").NewEP()
	must(t, err)
	defer e.Close()
	if v, err := e.Attr("engine_cpu"); err != nil || v != "-1" {
		t.Errorf("engine_cpu of a new endpoint: %q, %v; want -1", v, err)
	}
	for _, bad := range []string{"x", "-2", "1.5", "", strconv.Itoa(runtime.NumCPU() + 64)} {
		if err := e.SetAttr("engine_cpu", bad); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("engine_cpu %q: %v; want EINVAL", bad, err)
		}
	}
	for _, good := range []int{cpus[1], -1} {
		if err := e.SetAttr("engine_cpu", strconv.Itoa(good)); err != nil {
			t.Errorf("engine_cpu %d: %v", good, err)
		}
		if v, err := e.Attr("engine_cpu"); err != nil || v != strconv.Itoa(good) {
			t.Errorf("engine_cpu after writing %d: %q, %v", good, v, err)
		}
	}

	place := func(cpu int) func(*fabricfs.EP) error {
		return func(e *fabricfs.EP) error { return e.SetAttr("engine_cpu", strconv.Itoa(cpu)) }
	}
	p := newRingPairWith(t, d, 4096, place(cpus[0]), place(cpus[1]))
	if err := p.a.SetAttr("engine_cpu", "-1"); err == nil || !strings.Contains(p.a.Err(), "before enable") {
		t.Errorf("engine_cpu written after enable: %v (err file %q); want it refused", err, p.a.Err())
	}
	pingPongPinned(t, d, p, cpus)
}

// pingPongPinned runs 3,000 round trips of 64 bytes between p's endpoints
// and checks, before and throughout, that one thread of the daemon is
// pinned to each of cpus (the engine group placed there), that every
// other thread has the process's CPUs, and that the pinned threads do the
// work (they use CPU time).
func pingPongPinned(t *testing.T, d *daemon, p *ringPair, cpus []int) {
	t.Helper()
	pid := d.cmd.Process.Pid
	pinned := map[string]bool{}
	for _, c := range cpus {
		pinned[strconv.Itoa(c)] = true
	}
	// threads lists the daemon's threads by Cpus_allowed_list.
	threads := func() map[string][]string {
		lists := map[string][]string{}
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread ended
			}
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
					v = strings.TrimSpace(v)
					lists[v] = append(lists[v], filepath.Base(filepath.Dir(f)))
				}
			}
		}
		return lists
	}
	// A scan reads the threads one by one: a worker that moves meanwhile
	// can be seen pinned on both threads (the old one read before it let go
	// of it, the new one after it pinned it), or on neither. So a scan
	// that shows two threads pinned to one CPU is repeated, and fails only
	// if it keeps showing them.
	doubled := func(lists map[string][]string) bool {
		for l := range pinned {
			if len(lists[l]) > 1 {
				return true
			}
		}
		return false
	}
	scan := func() map[string][]string {
		lists := threads()
		for i := 0; i < 20 && doubled(lists); i++ {
			time.Sleep(time.Millisecond)
			lists = threads()
		}
		return lists
	}
	// The groups pin their threads when they start, as the endpoints'
	// rings are made: at the first open of one (here, the map of tx).
	for _, e := range []*fabricfs.EP{p.a, p.b} {
		if _, err := e.Tx(); err != nil {
			t.Fatal(err)
		}
	}
	settled := func(lists map[string][]string) bool {
		for l := range pinned {
			if len(lists[l]) != 1 {
				return false
			}
		}
		return len(lists) == len(pinned)+1
	}
	deadline := time.Now().Add(10 * time.Second)
	lists := scan()
	for !settled(lists) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		lists = scan()
	}
	if !settled(lists) {
		t.Fatalf("daemon threads (ids) by Cpus_allowed_list: %v; want one thread on each of CPUs %v and the others on the process's CPUs", lists, cpus)
	}
	others := ""
	for l := range lists {
		if !pinned[l] {
			others = l
		}
	}
	// ticks0 has each pinned thread's CPU time when first seen pinned, by
	// CPU.
	ticks0 := map[string]map[string]int64{}
	for l := range pinned {
		ticks0[l] = map[string]int64{}
	}
	ticks := func(tid string) (int64, bool) {
		n, err := statTicks(fmt.Sprintf("/proc/%d/task/%s", pid, tid))
		return n, err == nil // else the thread ended
	}
	sample := func() {
		lists := scan()
		for l, tids := range lists {
			if !pinned[l] && l != others {
				t.Errorf("threads %v on CPUs %s; want only %v (the engine) and %s", tids, l, cpus, others)
			}
		}
		for l := range pinned {
			if len(lists[l]) > 1 {
				t.Errorf("threads %v all pinned to CPU %s; want at most one", lists[l], l)
			}
			for _, tid := range lists[l] {
				if _, seen := ticks0[l][tid]; !seen {
					ticks0[l][tid], _ = ticks(tid)
				}
			}
		}
	}
	sample()
	const n = 3000
	must(t, p.b.PostRecv(p.mrB, 0, 64, 1, 0))
	must(t, p.a.PostRecv(p.mrA, 0, 64, 1, 0))
	for i := 0; i < n; i++ {
		must(t, p.a.PostSend(p.mrA, 512, 64, 2, 0))
		for _, c := range append(pollN(t, p.cqA, 1), pollN(t, p.cqB, 1)...) {
			if c.Err != 0 {
				t.Fatalf("message %d: completion %+v", i, c)
			}
		}
		must(t, p.b.PostRecv(p.mrB, 0, 64, 1, 0))
		must(t, p.b.PostSend(p.mrB, 512, 64, 2, 0))
		for _, c := range append(pollN(t, p.cqB, 1), pollN(t, p.cqA, 1)...) {
			if c.Err != 0 {
				t.Fatalf("answer %d: completion %+v", i, c)
			}
		}
		must(t, p.a.PostRecv(p.mrA, 0, 64, 1, 0))
		if i%100 == 0 {
			sample()
		}
	}
	for l, seen := range ticks0 {
		var used int64
		for tid, t0 := range seen {
			if t1, ok := ticks(tid); ok {
				used += t1 - t0
			}
		}
		if used == 0 {
			t.Errorf("the threads pinned to CPU %s (%d of them) used no CPU time during %d round trips: they are not the engine's", l, len(seen), n)
		}
	}
}
