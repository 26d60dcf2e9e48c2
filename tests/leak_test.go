package tests

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// openClone opens a kind's clone file and returns it with the new id.
func openClone(t *testing.T, d *daemon, kind string) (*os.File, string) {
	t.Helper()
	f, err := os.OpenFile(d.path("tcp", "lo", kind, "clone"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 32)
	n, err := f.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return f, strings.TrimSpace(string(b[:n]))
}

// write sends one command through an open ctl or clone file.
func write(t *testing.T, f *os.File, cmd string) {
	t.Helper()
	if _, err := f.Write([]byte(cmd)); err != nil {
		t.Fatalf("%s: %q: %v", f.Name(), cmd, err)
	}
}

// TestCloneLifetimeFreesSockets creates and closes clone objects - an EQ, a
// CQ, a listening passive endpoint, a connecting endpoint and the endpoint
// accepted for it - 1,000 times, and checks that the daemon holds as many
// file descriptors afterwards as before.
func TestCloneLifetimeFreesSockets(t *testing.T) {
	d := mount(t)
	pid := d.cmd.Process.Pid
	cycles := 1000
	if testing.Short() {
		cycles = 100
	}
	cycle := func() {
		eq, eqID := openClone(t, d, "eq")
		cq, cqID := openClone(t, d, "cq")
		pep, _ := openClone(t, d, "pep")
		write(t, pep, "bind eq "+eqID)
		write(t, pep, "listen 127.0.0.1:0")
		pepID := strings.TrimSpace(readAt(t, pep))
		local := d.read(t, "tcp", "lo", "pep", pepID, "local")
		ep, _ := openClone(t, d, "ep")
		write(t, ep, "bind eq "+eqID)
		write(t, ep, "bind cq "+cqID+" send,recv")
		write(t, ep, "enable")
		write(t, ep, "connect "+strings.TrimSpace(local))
		accepted := d.read(t, "tcp", "lo", "pep", pepID, "listen")
		if strings.TrimSpace(accepted) == "" {
			t.Fatal("listen returned no endpoint")
		}
		for _, f := range []*os.File{ep, pep, cq, eq} {
			f.Close()
		}
	}
	cycle() // warm up: the daemon's own lazily opened descriptors
	before := settledFDs(t, pid, -1)
	for i := 0; i < cycles; i++ {
		cycle()
	}
	after := settledFDs(t, pid, before)
	if after != before {
		t.Errorf("daemon has %d fds after %d cycles, %d before", after, cycles, before)
	}
	for _, k := range []string{"ep", "pep", "cq", "eq"} {
		es, _ := os.ReadDir(d.path("tcp", "lo", k))
		if len(es) != 1 {
			t.Errorf("%s still holds %d entries: %v", k, len(es), es)
		}
	}
}

// readAt reads a file from offset 0 (the id of a clone file).
func readAt(t *testing.T, f *os.File) string {
	t.Helper()
	b := make([]byte, 64)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b[:n])
}

// settledFDs waits until the daemon's fd count is want (or, with want -1,
// stops changing): releases reach the daemon asynchronously after close.
func settledFDs(t *testing.T, pid, want int) int {
	deadline := time.Now().Add(10 * time.Second)
	last := -1
	for {
		n := fdCount(t, pid)
		if n == want || (want < 0 && n == last) || time.Now().After(deadline) {
			return n
		}
		last = n
		time.Sleep(200 * time.Millisecond)
	}
}
