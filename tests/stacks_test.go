package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What a test shows of a process that did not finish in time, so that a
// rare hang can be understood from one failed run: where each thread of
// the process and of its children sleeps in the kernel (a request to a
// FUSE mount shows as fuse_* frames), and the stacks of every goroutine of
// every daemon the tests have mounted (fabricfs writes them to its log on
// SIGUSR1; the log is printed when the test fails).

// live holds the daemons that are mounted now (a sync.Map of *daemon).
var live sync.Map

// running holds the processes tests started that have not exited (a
// sync.Map of *proc): a wait that times out shows where each of them
// sleeps too, before the daemons' dump, whose signal can itself end a
// wait in a daemon.
var running sync.Map

// fuseWaiting lists each FUSE connection's requests that the kernel holds
// for its daemon, unanswered (fusectl's waiting): a count above zero while
// the daemon's goroutines are all idle means a request never reached it.
func fuseWaiting() string {
	dirs, _ := filepath.Glob("/sys/fs/fuse/connections/*")
	var b strings.Builder
	for _, d := range dirs {
		n, err := os.ReadFile(filepath.Join(d, "waiting"))
		if err == nil {
			fmt.Fprintf(&b, "connection %s: %s waiting\n", filepath.Base(d), strings.TrimSpace(string(n)))
		}
	}
	return b.String()
}

// dumpDaemons asks every mounted daemon for its goroutines' stacks and
// gives them a moment to reach the logs.
func dumpDaemons() {
	live.Range(func(k, _ any) bool {
		if d := k.(*daemon); d.cmd.Process != nil {
			d.cmd.Process.Signal(syscall.SIGUSR1)
		}
		return true
	})
	time.Sleep(500 * time.Millisecond)
}

// stacks describes each thread of process pid and of its descendants: its
// name, state, system call and kernel stack (as root).
func stacks(pid int) string {
	var b strings.Builder
	for _, p := range append([]int{pid}, descendants(pid)...) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", p))
		for _, task := range tasks {
			read := func(f string) string {
				data, _ := os.ReadFile(filepath.Join(task, f))
				return strings.TrimSpace(string(data))
			}
			fmt.Fprintf(&b, "pid %d thread %s (%s): %s; syscall %s\n%s\n", p, filepath.Base(task), read("comm"),
				statField(read("stat"), 0), read("syscall"), read("stack"))
		}
	}
	return b.String()
}

// descendants are the processes whose parent is pid, and theirs.
func descendants(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pp, err := strconv.Atoi(statField(string(data), 1)); err == nil && pp == pid {
			c, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, c)
			out = append(out, descendants(c)...)
		}
	}
	return out
}

// statField is field i after the command name of a /proc/PID/stat line:
// 0 the state, 1 the parent's pid.
func statField(stat string, i int) string {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return ""
	}
	f := strings.Fields(stat[end+1:])
	if i >= len(f) {
		return ""
	}
	return f[i]
}
