package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/ring"
)

// Waitable files (docs/tree.md, "Waiting"): poll(2), select(2) and
// epoll(7) on a blocking file say POLLIN only when a read would not block,
// and a waiting poll wakes when that changes.

// openPoll opens a file of the tree with O_NONBLOCK as a raw descriptor
// (an os.File would put it in the Go runtime's own epoll), closed at the
// end of the test.
func openPoll(t *testing.T, path string, flags int) int {
	t.Helper()
	fd, err := unix.Open(path, flags|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// pollIn polls fd for POLLIN for at most timeout and reports whether it is
// readable.
func pollIn(t *testing.T, fd int, timeout time.Duration) bool {
	t.Helper()
	ok, err := pollReadable(fd, timeout)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return ok
}

// pollReadable is pollIn for any goroutine: it returns poll's error.
func pollReadable(fd int, timeout time.Duration) (bool, error) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, int(timeout/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return n == 1 && pfd[0].Revents&unix.POLLIN != 0, err
	}
}

// waitsThenWakes checks the poll semantics of one blocking file: not
// readable while empty, a poll blocked on it not woken by nothing, woken
// (POLLIN) once trigger makes a read possible, and readable from then on
// until it is read.
func waitsThenWakes(t *testing.T, name string, fd int, trigger func()) {
	t.Helper()
	if pollIn(t, fd, 0) {
		t.Fatalf("%s: poll says readable while empty", name)
	}
	woke := make(chan bool, 1)
	go func() {
		ok, err := pollReadable(fd, 10*time.Second)
		woke <- ok && err == nil
	}()
	select {
	case <-woke:
		t.Fatalf("%s: a blocked poll returned before anything arrived", name)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	trigger()
	select {
	case ok := <-woke:
		if !ok {
			t.Fatalf("%s: the blocked poll returned without POLLIN", name)
		}
		t.Logf("%s: the blocked poll woke %v after the trigger", name, time.Since(start).Round(time.Millisecond))
	case <-time.After(8 * time.Second):
		t.Fatalf("%s: the blocked poll did not wake after the trigger", name)
	}
	if !pollIn(t, fd, 0) {
		t.Fatalf("%s: poll says not readable after the wake-up, before any read", name)
	}
}

// readFD reads fd at offset 0 and fails the test on error.
func readFD(t *testing.T, name string, fd int) string {
	t.Helper()
	b := make([]byte, 1<<16)
	n, err := unix.Pread(fd, b, 0)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b[:n])
}

// TestPollBlockingFiles takes each blocking file through waitsThenWakes:
// pep/N/listen (a connection request), eq/N/events (a connection
// established), cq/N/events and cq/N/wait (a send's completion),
// ep/N/data (a message), srx/N/data (a message through a shared receive
// context); after the read each is not readable again. Writable files say
// POLLOUT.
func TestPollBlockingFiles(t *testing.T) {
	d := mount(t)
	dom := func(elem ...string) string { return d.path(append([]string{"tcp", "lo"}, elem...)...) }
	for _, dir := range []string{"eq/ev", "eq/ea", "cq/ca", "cq/cb", "pep/l", "ep/a"} {
		if err := os.Mkdir(dom(dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	d.mustCtl(t, "bind eq ev", "tcp", "lo", "pep", "l", "ctl")
	d.mustCtl(t, "listen 127.0.0.1:0", "tcp", "lo", "pep", "l", "ctl")
	for _, c := range []string{"bind eq ea", "bind cq ca send,recv", "enable"} {
		d.mustCtl(t, c, "tcp", "lo", "ep", "a", "ctl")
	}

	listen := openPoll(t, dom("pep", "l", "listen"), unix.O_RDONLY)
	waitsThenWakes(t, "pep/l/listen", listen, func() {
		d.mustCtl(t, "connect "+strings.TrimSpace(d.read(t, "tcp", "lo", "pep", "l", "local")), "tcp", "lo", "ep", "a", "ctl")
	})
	b := strings.TrimSpace(readFD(t, "pep/l/listen", listen))
	if _, err := strconv.Atoi(b); err != nil {
		t.Fatalf("pep/l/listen gave %q", b)
	}

	ea := openPoll(t, dom("eq", "ea", "events"), unix.O_RDONLY)
	waitsThenWakes(t, "eq/ea/events", ea, func() {
		for _, c := range []string{"bind eq ev", "bind cq cb send,recv", "enable", "accept"} {
			d.mustCtl(t, c, "tcp", "lo", "ep", b, "ctl")
		}
	})
	if ev := readFD(t, "eq/ea/events", ea); !strings.HasPrefix(ev, "connected fid=ep/a") {
		t.Fatalf("eq/ea/events: %q", ev)
	}
	if pollIn(t, ea, 0) {
		t.Fatal("eq/ea/events: readable after its one event was read")
	}

	cbEvents := openPoll(t, dom("cq", "cb", "events"), unix.O_RDONLY)
	cbWait := openPoll(t, dom("cq", "cb", "wait"), unix.O_RDONLY)
	bData := openPoll(t, dom("ep", b, "data"), unix.O_RDWR)
	pfd := []unix.PollFd{{Fd: int32(bData), Events: unix.POLLOUT}}
	if n, err := unix.Poll(pfd, 0); err != nil || n != 1 || pfd[0].Revents&unix.POLLOUT == 0 {
		t.Fatalf("ep/%s/data: poll for POLLOUT gave %d %v %#x; the data file is always writable", b, n, err, pfd[0].Revents)
	}
	aData := openPoll(t, dom("ep", "a", "data"), unix.O_RDWR)
	woken := make(chan bool, 1)
	go func() {
		ok, err := pollReadable(cbWait, 10*time.Second)
		woken <- ok && err == nil
	}()
	waitsThenWakes(t, "cq/cb/events", cbEvents, func() {
		waitsThenWakes(t, "ep/a/data", aData, func() {
			if _, err := unix.Write(bData, []byte("to a")); err != nil {
				t.Fatal(err)
			}
		})
	})
	if !<-woken {
		t.Fatal("cq/cb/wait: a blocked poll did not wake with POLLIN")
	}
	if m := readFD(t, "ep/a/data", aData); m != "to a" {
		t.Fatalf("ep/a/data: %q", m)
	}
	if pollIn(t, aData, 0) {
		t.Fatal("ep/a/data: readable after its one message was read")
	}
	if ev := readFD(t, "cq/cb/events", cbEvents); !strings.Contains(ev, "FI_SEND") {
		t.Fatalf("cq/cb/events: %q", ev)
	}
	if pollIn(t, cbEvents, 0) || pollIn(t, cbWait, 0) {
		t.Fatal("cq/cb: events or wait readable after the CQ was read empty")
	}

	// A shared receive context's data file: RDM endpoint r takes its
	// receives from srx s; x sends to r.
	for _, dir := range []string{"av/v", "cq/cr", "cq/cx", "srx/s", "ep/r", "ep/x"} {
		if err := os.Mkdir(dom(dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []string{"r", "x"} {
		if err := os.WriteFile(dom("ep", e, "attr", "type"), []byte("FI_EP_RDM\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"bind av v", "bind cq cr send,recv", "bind srx s", "enable"} {
		d.mustCtl(t, c, "tcp", "lo", "ep", "r", "ctl")
	}
	for _, c := range []string{"bind av v", "bind cq cx send,recv", "enable"} {
		d.mustCtl(t, c, "tcp", "lo", "ep", "x", "ctl")
	}
	d.mustCtl(t, "insert "+strings.TrimSpace(d.read(t, "tcp", "lo", "ep", "r", "local")), "tcp", "lo", "av", "v", "ctl")
	d.mustCtl(t, "dest 0", "tcp", "lo", "ep", "x", "ctl")
	sData := openPoll(t, dom("srx", "s", "data"), unix.O_RDONLY)
	waitsThenWakes(t, "srx/s/data", sData, func() {
		if err := os.WriteFile(dom("ep", "x", "data"), []byte("to srx"), 0); err != nil {
			t.Fatal(err)
		}
	})
	if m := readFD(t, "srx/s/data", sData); m != "to srx" {
		t.Fatalf("srx/s/data: %q", m)
	}
	if pollIn(t, sData, 0) {
		t.Fatal("srx/s/data: readable after its one message was read")
	}
}

// TestKick: the doorbell verb kick wakes the engine's worker serving an
// enabled endpoint's or shared receive context's rings; before enable
// there are no rings, and it fails.
func TestKick(t *testing.T) {
	d := mount(t)
	for _, dir := range []string{"eq/e", "cq/c", "ep/a", "srx/s"} {
		if err := os.Mkdir(d.path("tcp", "lo", dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, obj := range []string{"ep/a", "srx/s"} {
		p := d.path("tcp", "lo", obj, "ctl")
		if err := ctl(p, "kick"); err == nil {
			t.Errorf("kick > %s before enable succeeded", obj)
		}
		if e := d.read(t, "tcp", "lo", obj, "err"); !strings.Contains(e, "not enabled") {
			t.Errorf("%s/err after kick before enable: %q", obj, e)
		}
	}
	for _, c := range []string{"bind eq e", "bind cq c send,recv", "enable", "kick"} {
		d.mustCtl(t, c, "tcp", "lo", "ep", "a", "ctl")
	}
	d.mustCtl(t, "enable", "tcp", "lo", "srx", "s", "ctl")
	d.mustCtl(t, "kick", "tcp", "lo", "srx", "s", "ctl")
}

// TestKickWakesEngine: a send published on a sleeping daemon's tx ring
// without a wake-up (a producer without futex) is served once the
// producer writes kick, not at the engine's one-minute safety wake-up.
func TestKickWakesEngine(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	eq, err := dom.NewEQ()
	must(t, err)
	t.Cleanup(func() { eq.Close() })
	cqA, err := dom.NewCQ(0)
	must(t, err)
	t.Cleanup(func() { cqA.Close() })
	cqB, err := dom.NewCQ(0)
	must(t, err)
	t.Cleanup(func() { cqB.Close() })
	a, b, pep, err := dom.Connect(eq, cqA, cqB)
	must(t, err)
	t.Cleanup(func() { a.Close(); pep.Close() })
	mrA, err := dom.NewMR(4096, "FI_SEND")
	must(t, err)
	t.Cleanup(func() { mrA.Close() })
	mrB, err := dom.NewMR(4096, "FI_RECV")
	must(t, err)
	t.Cleanup(func() { mrB.Close() })
	must(t, b.PostRecv(mrB, 0, 100, 1, 0))

	tx, err := a.Tx()
	must(t, err)
	for deadline := time.Now().Add(5 * time.Second); tx.Flags()&ring.NeedWakeup == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon's worker never went to sleep on ep/a/tx")
		}
	}
	// Publish as a producer that does not look at the flag would: the
	// worker sleeps on.
	tx.ClearFlags(ring.NeedWakeup)
	must(t, a.PostSend(mrA, 0, 100, 11, 0))
	time.Sleep(500 * time.Millisecond)
	if cs := cqA.Poll(10); len(cs) != 0 {
		t.Fatalf("the send completed without a wake-up: %+v; the test shows nothing", cs)
	}
	start := time.Now()
	must(t, a.Ctl("kick"))
	c := pollN(t, cqA, 1)[0]
	if c.Context != 11 || c.Err != 0 {
		t.Fatalf("send completion %+v, want context 11 without error", c)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the send completed %v after kick", waited)
	}
}

// TestPollAsyncio runs testdata/poll_asyncio.py: a Python asyncio program
// that waits on three CQs, an EQ, a listen file and two data files with
// loop.add_reader alone (no thread, no polling timer) while a connection
// is made and messages flow both ways, and spends no CPU while idle.
func TestPollAsyncio(t *testing.T) {
	needCmd(t, "python3")
	d := mount(t)
	out := runPython(t, "poll_asyncio.py", d.path("tcp", "lo"))
	kv := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			kv[k] = v
		}
	}
	for _, k := range []string{"ta_send", "ra_recv", "cb_send", "cb_recv", "a_data", "b_data"} {
		if kv[k] != "5" {
			t.Errorf("%s=%q, want 5 (the completions and messages of 5 messages each way)", k, kv[k])
		}
	}
	if kv["ea_connected"] != "1" {
		t.Errorf("ea_connected=%q, want 1", kv["ea_connected"])
	}
	for _, phase := range []string{"idle_before", "idle_after"} {
		// Nothing is ready while idle: no reader runs, and the process
		// sleeps in epoll_wait (at most 20 ms of CPU in the 1 s).
		if kv[phase+"_calls"] != "0" {
			t.Errorf("%s_calls=%q: readers ran while nothing arrived", phase, kv[phase+"_calls"])
		}
		cpu, err := strconv.ParseFloat(kv[phase+"_cpu"], 64)
		if err != nil || cpu > 0.02 {
			t.Errorf("%s_cpu=%q: want at most 0.02 s of CPU in 1 s idle", phase, kv[phase+"_cpu"])
		}
	}
}

// TestSelectData runs testdata/select_data.py: select(2) on two connected
// endpoints' data files says readable only where a message is waiting, and
// a blocked select wakes when one arrives.
func TestSelectData(t *testing.T) {
	needCmd(t, "python3")
	d := mount(t)
	runPython(t, "select_data.py", d.path("tcp", "lo"))
}

// runPython runs a program of testdata with python3 and returns its
// output; it fails the test if the program fails.
func runPython(t *testing.T, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", append([]string{filepath.Join("testdata", script)}, args...)...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", script, out)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return string(out)
}

// TestPollWhileReading: a poll of a file that a read is blocked on (as a
// Go program's runtime does when it registers the file with its epoll) is
// answered at once, not after the read: not readable, since what arrives
// is the blocked read's; the read then gets the message and the poll
// still answers.
func TestPollWhileReading(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	eq, err := dom.NewEQ()
	must(t, err)
	t.Cleanup(func() { eq.Close() })
	cq, err := dom.NewCQ(0)
	must(t, err)
	t.Cleanup(func() { cq.Close() })
	a, b, pep, err := dom.Connect(eq, cq, cq)
	must(t, err)
	t.Cleanup(func() { a.Close(); pep.Close() })

	for _, f := range []struct{ name, path, send string }{
		{"ep/a/data", d.path("tcp", "lo", "ep", a.ID(), "data"), d.path("tcp", "lo", "ep", b.ID(), "data")},
		{"cq/events", d.path("tcp", "lo", "cq", cq.ID(), "events"), d.path("tcp", "lo", "ep", b.ID(), "data")},
	} {
		// Empty the CQ: the connection made no entries, but be sure.
		readNonblock(d.path("tcp", "lo", "cq", cq.ID(), "events"))
		fd, err := unix.Open(f.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		read := make(chan string, 1)
		go func() {
			b := make([]byte, 4096)
			n, err := unix.Pread(fd, b, 0)
			if err != nil {
				read <- "error: " + err.Error()
				return
			}
			read <- string(b[:max(n, 0)])
		}()
		time.Sleep(200 * time.Millisecond) // the read blocks
		answered := make(chan bool, 1)
		go func() {
			ok, err := pollReadable(fd, 0)
			answered <- ok && err == nil
		}()
		select {
		case ready := <-answered:
			if ready {
				t.Errorf("%s: poll says readable while a read waits and nothing arrived", f.name)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: a poll waited for the blocked read", f.name)
		}
		if err := os.WriteFile(f.send, []byte("msg"), 0); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-read:
			if got == "" || strings.HasPrefix(got, "error") {
				t.Errorf("%s: the blocked read gave %q", f.name, got)
			}
		case <-time.After(8 * time.Second):
			t.Fatalf("%s: the blocked read did not return after the message", f.name)
		}
		unix.Close(fd)
	}
}
