package tests

import (
	"bufio"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
)

// TestTrafficClass: an endpoint's tx_attr.tclass, "The traffic class
// (tclass) to use for the endpoint" (fi_endpoint(3)), chosen in
// attr/tx_tclass before enable, is the DSCP of its TCP packets on the
// wire, as a capture (tshark on lo) shows for every segment with data:
// fi_tc_dscp_set(46) on one endpoint, FI_TC_SCAVENGER (CS1, 8) on its
// peer.
func TestTrafficClass(t *testing.T) {
	needCmd(t, "tshark")
	d := mount(t)
	tr := d.tree(t)
	dom := tr.Domain("tcp", "lo")
	eq, err := dom.NewEQ()
	if err != nil {
		t.Fatal(err)
	}
	defer eq.Close()
	cq, err := dom.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	class := func(tc string) func(*fabricfs.EP) error {
		return func(e *fabricfs.EP) error {
			if err := e.SetAttr("tx_tclass", tc); err != nil {
				return err
			}
			return e.Setup(eq, cq)
		}
	}
	// The capture starts first, on lo, for the connections to come.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cap := exec.CommandContext(ctx, "tshark", "-l", "-n", "-i", "lo", "-f", "tcp", "-T", "fields",
		"-e", "tcp.srcport", "-e", "ip.dsfield.dscp", "-e", "tcp.len")
	out, err := cap.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cap.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cap.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cap.Process.Kill(); cap.Wait() }()
	ready := bufio.NewScanner(stderr)
	for ready.Scan() && !strings.Contains(ready.Text(), "Capture started") {
	}
	go func() { // keep draining its stderr
		for ready.Scan() {
		}
	}()

	a, b, pep, err := dom.ConnectWith(eq, class("0x12e"), class("FI_TC_SCAVENGER"))
	if err != nil {
		t.Fatal(err)
	}
	defer pep.Close()
	defer a.Close()
	if got, _ := a.Attr("tx_tclass"); strings.TrimSpace(got) != "0x12e" {
		t.Errorf("a's tx_tclass reads %q", got)
	}
	portOf := func(e *fabricfs.EP) string {
		l, err := e.Local()
		if err != nil {
			t.Fatal(err)
		}
		return l[strings.LastIndex(strings.TrimSpace(l), ":")+1:]
	}
	pa, pb := strings.TrimSpace(portOf(a)), strings.TrimSpace(portOf(b))
	mr, err := dom.NewMR(4096, "FI_SEND,FI_RECV")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	for i := 0; i < 3; i++ {
		if err := b.PostRecv(mr, 1024, 64, 1, 0); err != nil {
			t.Fatal(err)
		}
		if err := a.PostSend(mr, 0, 64, 2, 0); err != nil {
			t.Fatal(err)
		}
		if err := cq.Wait(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		cq.Poll(16)
	}
	seen := map[string]map[string]bool{pa: {}, pb: {}}
	lines := bufio.NewScanner(out)
	deadline := time.AfterFunc(10*time.Second, cancel)
	defer deadline.Stop()
	for lines.Scan() {
		// Segments with data: the handshake's SYN-ACK comes from the
		// listening socket, before any endpoint has the connection.
		f := strings.Fields(lines.Text())
		if len(f) != 3 || seen[f[0]] == nil || f[2] == "0" {
			continue
		}
		seen[f[0]][f[1]] = true
		if len(seen[pa]) > 0 && len(seen[pb]) > 0 {
			break
		}
	}
	want := map[string]string{pa: strconv.Itoa(46), pb: strconv.Itoa(8)}
	for port, dscps := range seen {
		if len(dscps) != 1 || !dscps[want[port]] {
			t.Errorf("packets from port %s carry DSCP %v, want only %s", port, dscps, want[port])
		}
	}
}
