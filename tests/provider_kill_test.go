package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var cqTotal = regexp.MustCompile(`\btotal=(\d+)`)

// TestProviderLiveAndKilled: while a libfabric program (fi_pingpong, on
// FI_EP_RDM over the provider) runs, its endpoint, CQ and memory regions
// are objects of the tree, so cat shows them: the test reads an endpoint's
// status and sees a CQ's completion count grow mid-run. After kill -9 of
// both sides, the tree's objects and the daemon's descriptors return
// to where they were before the program started: the provider opened every
// object through a clone file, which dies with the process.
func TestProviderLiveAndKilled(t *testing.T) {
	d := mount(t)
	pid := d.cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(freeTCPPort(t))
	// pingpong starts a server and a client of iters 4 KiB round trips.
	pingpong := func(iters string) (srv, cli *exec.Cmd) {
		args := []string{"-p", "fabricfs", "-d", "tcp/lo", "-e", "rdm", "-I", iters, "-S", "4096"}
		srv = fiCommand(t, d, ctx, "fi_pingpong", append(args, "-B", port)...)
		cli = fiCommand(t, d, ctx, "fi_pingpong", append(args, "-P", port, "127.0.0.1")...)
		for _, c := range []*exec.Cmd{srv, cli} {
			if c == cli {
				time.Sleep(300 * time.Millisecond) // the server listens on its control port first
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			c := c
			t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
		}
		return srv, cli
	}
	// A short run to the end first: what the daemon makes once and keeps
	// (the tcp provider's epoll instance) is then part of the baseline.
	srv, cli := pingpong("10")
	for _, c := range []*exec.Cmd{cli, srv} {
		if err := c.Wait(); err != nil {
			t.Fatalf("a short fi_pingpong run: %v", err)
		}
	}
	objs0, fds0 := treeObjects(t, d), fdTargets(t, pid)
	srv, cli = pingpong("100000000")

	// Mid-run: an endpoint's status, and a CQ whose count grows.
	deadline := time.Now().Add(30 * time.Second)
	var status string
	grew := false
	for !grew {
		if time.Now().After(deadline) {
			t.Fatalf("no endpoint with a growing CQ in the tree after 30 s (endpoint status %q)\ndaemon log:\n%s", status, d.logText())
		}
		time.Sleep(100 * time.Millisecond)
		eps, _ := filepath.Glob(d.path("tcp", "lo", "ep", "*", "status"))
		cqs, _ := filepath.Glob(d.path("tcp", "lo", "cq", "*", "status"))
		mrs, _ := filepath.Glob(d.path("tcp", "lo", "mr", "*", "status"))
		if len(eps) < 2 || len(cqs) == 0 || len(mrs) == 0 {
			continue
		}
		status = readFile(t, eps[0])
		before := totalOf(readFile(t, cqs[0]))
		time.Sleep(200 * time.Millisecond)
		grew = totalOf(readFile(t, cqs[0])) > before && before > 0
	}
	t.Logf("mid-run endpoint status: %s", status)
	if !regexp.MustCompile(`^ep \d+ rdm enabled `).MatchString(status) {
		t.Errorf("endpoint status mid-run = %q, want an enabled endpoint", status)
	}

	for _, c := range []*exec.Cmd{srv, cli} {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Wait()
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		objs, fds := treeObjects(t, d), fdTargets(t, pid)
		if slices.Equal(objs, objs0) && slices.Equal(fds, fds0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after kill -9 the tree has objects %q (before: %q) and the daemon descriptors %q (before: %q)", objs, objs0, fds, fds0)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// treeObjects lists every object directory of d's tree (PROV/DOMAIN/KIND/ID).
func treeObjects(t *testing.T, d *daemon) []string {
	t.Helper()
	var objs []string
	for _, kind := range []string{"ep", "pep", "cq", "eq", "av", "mr", "cntr"} {
		m, err := filepath.Glob(d.path("*", "*", kind, "*", "ctl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(d.mnt, filepath.Dir(p))
			objs = append(objs, rel)
		}
	}
	slices.Sort(objs)
	return objs
}

// fdTargets lists what process pid's descriptors point at, sorted (sockets
// and memfds by kind, without their inode numbers).
func fdTargets(t *testing.T, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

func totalOf(status string) uint64 {
	m := cqTotal.FindStringSubmatch(status)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
