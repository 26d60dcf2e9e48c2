package ring

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	xprocEnv  = "FABRICFS_RING_XPROC_CHILD"
	xprocName = "fabricfs-ring-xproc"
)

// TestCrossProcessWake runs the completion-queue consumer in another
// process: the test binary re-executed, mapping the parent's memfd (fd 3)
// through /proc/self/fd/3 with MapFile, and sleeping with Ring.Sleep
// whenever the ring is empty. In every round the parent waits until the
// child has consumed everything, set NeedWakeup and is blocked in FUTEX_WAIT
// on the ring's wake word (seen in /proc/PID/task/*/syscall), then publishes
// a batch. The first time, it also checks that the sleeping child uses no
// CPU. The child's sleeps have a long timeout that it treats as a failure,
// so only the futex wake-up can move it.
func TestCrossProcessWake(t *testing.T) {
	if os.Getenv(xprocEnv) == "1" {
		os.Exit(xprocChild())
	}
	const (
		entries = 16
		rounds  = 20
	)
	reg, err := NewMemfd(xprocName, Size(entries))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	r, err := Init(reg.Mem, TypeCompletion, entries, FeatFutex)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcessWake$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), xprocEnv+"=1")
	cmd.ExtraFiles = []*os.File{reg.File} // fd 3 in the child
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if !t.Failed() {
			return
		}
		cmd.Process.Kill()
		<-exited
		t.Logf("child output:\n%s", out.String())
	}()
	pid := cmd.Process.Pid

	var wakeAddr uintptr // the wake word in the child's mapping
	waitUntil(t, "the child maps the ring", 20*time.Second, func() bool {
		wakeAddr = mappingOf(pid, xprocName)
		return wakeAddr != 0
	})
	wakeAddr += WakeOff
	asleep := func() bool {
		return r.Len() == 0 && r.Flags()&NeedWakeup != 0 && blockedIn(pid, unix.SYS_FUTEX, wakeAddr, futexWait)
	}

	var seq uint64
	for round := range rounds {
		waitUntil(t, fmt.Sprintf("the child sleeps in FUTEX_WAIT (round %d)", round), 20*time.Second, asleep)
		if round == 0 {
			before := cpuTicks(t, pid)
			time.Sleep(300 * time.Millisecond)
			after := cpuTicks(t, pid)
			if !asleep() {
				t.Fatal("the child woke up by itself")
			}
			// A polling consumer would burn ~30 ticks (USER_HZ 100).
			if after-before > 3 {
				t.Errorf("the sleeping child used %d CPU ticks in 300ms", after-before)
			}
			t.Logf("sleeping child: %d CPU ticks in 300ms", after-before)
		}
		_, tail := r.Peek()
		n := uint32(round%5 + 1)
		for i := range n {
			c := CQE{Context: seq, Len: seq * 3, Flags: 1 << 10, SrcAddr: ^uint64(0)}
			c.Encode(r.Entry(tail + i))
			seq++
		}
		r.Publish(n) // NeedWakeup is set: this wakes the child
	}
	waitUntil(t, "the child consumes the last batch", 20*time.Second, asleep)
	r.SetFlags(Dead) // as the daemon does when it closes the CQ
	r.Wake()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not exit after Dead")
	}
	want := fmt.Sprintf("consumed %d", seq)
	if !strings.Contains(out.String(), want) {
		t.Errorf("child output %q, want %q", out.String(), want)
	}
	if w := *r.WakeWord(); w != rounds+1 {
		t.Errorf("wake word %d, want %d (one per round, one for Dead)", w, rounds+1)
	}
	t.Logf("%d rounds, %d entries; child: %s", rounds, seq, strings.TrimSpace(out.String()))
}

// xprocChild is the consumer process; it returns its exit status.
func xprocChild() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "child: "+format+"\n", args...)
		return 1
	}
	reg, err := MapFile("/proc/self/fd/3")
	if err != nil {
		return fail("%v", err)
	}
	defer reg.Close()
	r, err := Open(reg.Mem)
	if err != nil {
		return fail("%v", err)
	}
	if r.Type() != TypeCompletion {
		return fail("type %d", r.Type())
	}
	var seq uint64
	sleeps := 0
	for {
		head, tail := r.Peek()
		if tail-head > r.Entries() {
			return fail("head %d tail %d", head, tail)
		}
		for ; head != tail; head++ {
			c, err := DecodeCQE(r.Entry(head))
			if err != nil {
				return fail("entry %d: %v", seq, err)
			}
			if c.Context != seq || c.Len != seq*3 || c.Flags != 1<<10 || c.SrcAddr != ^uint64(0) {
				return fail("entry %d: %+v", seq, c)
			}
			seq++
		}
		r.Release(head)
		if r.Flags()&Dead != 0 && r.Len() == 0 {
			fmt.Printf("consumed %d, slept %d times\n", seq, sleeps)
			return 0
		}
		sleeps++
		if err := r.Sleep(nil, 60*time.Second); err != nil {
			return fail("Sleep: %v", err)
		}
	}
}

// mappingOf is the start address of the mapping of memfd name in process
// pid, or 0.
func mappingOf(pid int, name string) uintptr {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if !strings.Contains(line, "/memfd:"+name+" ") && !strings.HasSuffix(line, "/memfd:"+name) {
			continue
		}
		start, _, _ := strings.Cut(line, "-")
		a, err := strconv.ParseUint(start, 16, 64)
		if err == nil {
			return uintptr(a)
		}
	}
	return 0
}

// cpuTicks is the user plus system time of process pid, in clock ticks.
func cpuTicks(t *testing.T, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(b, []byte(") ")) // after "pid (comm) "
	if i < 0 {
		t.Fatalf("bad /proc/%d/stat: %q", pid, b)
	}
	fs := strings.Fields(string(b[i+2:])) // fs[0] is field 3, state
	if len(fs) < 13 {
		t.Fatalf("bad /proc/%d/stat: %q", pid, b)
	}
	utime, _ := strconv.ParseUint(fs[11], 10, 64) // field 14
	stime, _ := strconv.ParseUint(fs[12], 10, 64) // field 15
	return utime + stime
}
