package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	lines := captureFields(t, ctx, []string{"-f", "tcp"}, "tcp.srcport", "ip.dsfield.dscp", "tcp.len")

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

// captureFields starts tshark on lo with args (a capture filter, decode
// rules) printing fields of each packet as it sees it, and returns its
// output once it is capturing. ctx's end stops it; so does the test's.
func captureFields(t *testing.T, ctx context.Context, args []string, fields ...string) *bufio.Scanner {
	t.Helper()
	argv := append([]string{"-l", "-n", "-i", "lo"}, args...)
	argv = append(argv, "-T", "fields")
	for _, f := range fields {
		argv = append(argv, "-e", f)
	}
	cap := exec.CommandContext(ctx, "tshark", argv...)
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
	t.Cleanup(func() { cap.Process.Kill(); cap.Wait() })
	ready := bufio.NewScanner(stderr)
	for ready.Scan() && !strings.Contains(ready.Text(), "Capture started") {
	}
	go func() { // keep draining its stderr
		for ready.Scan() {
		}
	}()
	return bufio.NewScanner(out)
}

// TestVerbsTrafficClass: a verbs endpoint's traffic class is in its
// packets' IP header, where RoCEv2 carries the GRH's traffic class, as a
// capture on lo shows. The domain's attr/tclass, "the default traffic
// class that will be associated any endpoints created within the domain"
// (fi_domain(3)), is 0x12e (fi_tc_dscp_set(46)): endpoint a leaves its
// own unset ("If tclass is unset or set to FI_TC_UNSPEC, the endpoint
// will use the default traffic class associated with the domain.",
// fi_endpoint(3)) and its SENDs carry DSCP 46; b chooses
// FI_TC_SCAVENGER, and its ACKs carry CS1 (8).
func TestVerbsTrafficClass(t *testing.T) {
	needCmd(t, "tshark")
	port := freeUDPPort(t)
	d := mountWith(t, "-roce-port", strconv.Itoa(port))
	dom := d.tree(t).Domain("verbs", verbsDevice)
	if err := os.WriteFile(filepath.Join(dom.Dir, "attr", "tclass"), []byte("0x12e\n"), 0); err != nil {
		t.Fatal(err)
	}
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
	setup := func(tc string) func(*fabricfs.EP) error {
		return func(e *fabricfs.EP) error {
			if tc != "" {
				if err := e.SetAttr("tx_tclass", tc); err != nil {
					return err
				}
			}
			return e.Setup(eq, cq)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lines := captureFields(t, ctx, []string{"-f", fmt.Sprintf("udp port %d", port), "-d", fmt.Sprintf("udp.port==%d,infiniband", port)},
		"infiniband.bth.opcode", "ip.dsfield.dscp")
	a, b, pep, err := dom.ConnectWith(eq, setup(""), setup("FI_TC_SCAVENGER"))
	if err != nil {
		t.Fatal(err)
	}
	defer pep.Close()
	defer a.Close()
	defer b.Close()
	if got, _ := a.Attr("tx_tclass"); strings.TrimSpace(got) != "0x12e" {
		t.Errorf("a's tx_tclass reads %q, want the domain's 0x12e", got)
	}
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
		for n := 0; n < 2; { // the send's and the receive's
			if err := cq.Wait(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			n += len(cq.Poll(16))
		}
	}
	// RC_SEND_ONLY (4) from a, RC_ACKNOWLEDGE (17) from b; the CM's MADs
	// (UD_SEND_ONLY) go with the device's own class.
	want := map[string]string{"4": "46", "17": "8"}
	seen := map[string]map[string]bool{"4": {}, "17": {}}
	deadline := time.AfterFunc(10*time.Second, cancel)
	defer deadline.Stop()
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) != 2 || seen[f[0]] == nil {
			continue
		}
		seen[f[0]][f[1]] = true
		if len(seen["4"]) > 0 && len(seen["17"]) > 0 {
			break
		}
	}
	for op, dscps := range seen {
		if len(dscps) != 1 || !dscps[want[op]] {
			t.Errorf("packets of opcode %s carry DSCP %v, want only %s", op, dscps, want[op])
		}
	}
}

// TestDomainTClass: root writes a domain's attr/tclass, "the default
// traffic class that will be associated any endpoints created within the
// domain" (fi_domain(3)); the domain's entries say it in
// domain_attr.tclass, endpoints made after take it as their tx_tclass
// ("If tclass is unset or set to FI_TC_UNSPEC, the endpoint will use the
// default traffic class associated with the domain.", fi_endpoint(3))
// and may choose another, endpoints made before keep theirs, and a value
// that is no class is refused.
func TestDomainTClass(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	file := filepath.Join(dom.Dir, "attr", "tclass")
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("attr/tclass: %v, %v; want mode 0644 (root writes)", st, err)
	}
	before, err := dom.NewEP()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if err := os.WriteFile(file, []byte("FI_TC_LOW_LATENCY\n"), 0); err != nil {
		t.Fatal(err)
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read(file); got != "0x201" {
		t.Errorf("attr/tclass reads %q after FI_TC_LOW_LATENCY, want 0x201", got)
	}
	if info := read(filepath.Join(dom.Dir, "info")); !strings.Contains(info, "tclass: 0x201") {
		t.Errorf("the domain's info does not say tclass: 0x201:\n%s", info)
	}
	ep, err := dom.NewEP()
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	attr := func(e *fabricfs.EP) string { v, _ := e.Attr("tx_tclass"); return strings.TrimSpace(v) }
	if got, old := attr(ep), attr(before); got != "0x201" || old != "0x0" {
		t.Errorf("tx_tclass: %q for an endpoint made after, %q for one made before; want 0x201 and 0x0", got, old)
	}
	if err := ep.SetAttr("tx_tclass", "FI_TC_BULK_DATA"); err != nil || attr(ep) != "0x203" {
		t.Errorf("choosing FI_TC_BULK_DATA: %v, tx_tclass %q", err, attr(ep))
	}
	if err := ep.SetAttr("tx_tclass", "FI_TC_UNSPEC"); err != nil || attr(ep) != "0x201" {
		t.Errorf("choosing FI_TC_UNSPEC: %v, tx_tclass %q, want the domain's 0x201", err, attr(ep))
	}
	if err := os.WriteFile(file, []byte("fast please\n"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("writing a non-class: %v, want EINVAL", err)
	}
	if got := read(file); got != "0x201" {
		t.Errorf("attr/tclass reads %q after a refused write", got)
	}
}
