// Package tshark holds what the RoCEv2 capture tests share: capturing
// packets on lo with tshark, reading fields of the capture as Wireshark's
// dissector decodes them, and icrc.py, an ICRC calculator written apart
// from the Go code (Python's zlib over the masked bytes), that checks the
// ICRC of every captured datagram. Tests that need a tool or root skip
// without it, unless the environment variable CI is set: there they fail.
package tshark

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RoCEPort is the UDP port tshark dissects as RoCEv2 without being told.
const RoCEPort = 4791

// Need returns the path of the program name, or skips t (fails it if CI
// is set) when it is not installed.
func Need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed (scripts/deps.sh installs it): %v", name, err)
		}
		t.Skipf("no %s (scripts/deps.sh installs it)", name)
	}
	return p
}

// NeedRoot skips t (fails it if CI is set) unless it runs as root, which
// capturing on lo needs.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("capturing on lo needs root")
	}
	t.Skip("capturing on lo needs root")
}

// NeedCapture skips t (fails it if CI is set) unless it can capture on lo
// and check the capture: tshark, python3 (icrc.py) and root.
func NeedCapture(t testing.TB) {
	t.Helper()
	Need(t, "tshark")
	Need(t, "python3")
	NeedRoot(t)
}

// A Capture is a tshark process writing packets from lo to a pcap file.
type Capture struct {
	cmd  *exec.Cmd
	done chan error // tshark's exit status, once it has ended

	mu     sync.Mutex
	stderr strings.Builder
}

// log returns what tshark has written to its standard error so far.
func (c *Capture) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// Start starts tshark capturing count packets on lo that the capture
// filter (pcap-filter(7): "udp port 4791") lets through into file, and
// returns once tshark says it is capturing. tshark runs in
// its own process group, with the dumpcap it starts; the test's cleanup
// stops the group if Wait did not see it end.
func Start(t testing.TB, filter string, count int, file string) *Capture {
	t.Helper()
	c := &Capture{done: make(chan error, 1)}
	c.cmd = exec.Command(Need(t, "tshark"), "-i", "lo", "-f", filter,
		"-c", strconv.Itoa(count), "-F", "pcap", "-w", file, "-q")
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start tshark: %v", err)
	}
	pid := c.cmd.Process.Pid
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			syscall.Kill(-pid, syscall.SIGKILL)
			<-c.done
		}
	})
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for once := true; sc.Scan(); {
			c.mu.Lock()
			c.stderr.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if once && strings.Contains(sc.Text(), "Capture started") {
				started <- true
				once = false
			}
		}
		io.Copy(io.Discard, stderr)
		close(started)
		c.done <- c.cmd.Wait()
		close(c.done)
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatalf("tshark ended before capturing:\n%s", c.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tshark did not start capturing in 30 s:\n%s", c.log())
	}
	return c
}

// Wait waits for tshark to end after its count of packets; after timeout
// it interrupts it (SIGINT, which makes it flush and stop dumpcap) and
// fails t.
func (c *Capture) Wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, c.log())
		}
		return
	case <-time.After(timeout):
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
	}
	t.Fatalf("tshark captured fewer packets than sent in %v:\n%s", timeout, c.log())
}

// Fields reads the capture pcap with tshark and returns, for each packet,
// the value of each field (Wireshark's names: "infiniband.bth.opcode"),
// its first occurrence, "" when absent. Port is the UDP port the RoCEv2
// packets use: tshark is told to dissect it as InfiniBand unless it is
// 4791. The heuristic dissector of RPC over RDMA, which a SEND payload
// can trip, is disabled.
func Fields(t testing.TB, pcap string, port int, fields ...string) []map[string]string {
	t.Helper()
	args := []string{"-r", pcap, "--disable-heuristic", "rpcrdma_infiniband", "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"}
	if port != RoCEPort {
		args = append(args, "-d", fmt.Sprintf("udp.port==%d,infiniband", port))
	}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(Need(t, "tshark"), args...).Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", strings.Join(args, " "), err)
	}
	var rows []map[string]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		row := map[string]string{}
		for j, v := range strings.Split(line, "\t") {
			if j < len(fields) {
				row[fields[j]] = v
			}
		}
		rows = append(rows, row)
	}
	return rows
}

//go:embed icrc.py
var icrcPy []byte

// ICRC runs icrc.py with args ("pcap FILE", or "hex" with IP datagrams in
// hex on stdin) and returns, for each datagram, the ICRC it computed and
// the one the datagram carries.
func ICRC(t testing.TB, stdin string, args ...string) [][2]uint32 {
	t.Helper()
	script := filepath.Join(t.TempDir(), "icrc.py")
	if err := os.WriteFile(script, icrcPy, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Need(t, "python3"), append([]string{script}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("icrc.py %v: %v", args, err)
	}
	var pairs [][2]uint32
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var p [2]uint32
		if _, err := fmt.Sscanf(line, "%x %x", &p[0], &p[1]); err != nil {
			t.Fatalf("icrc.py printed %q: %v", line, err)
		}
		pairs = append(pairs, p)
	}
	return pairs
}
