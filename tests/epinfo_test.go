package tests

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestEndpointFromInfo: "The properties and behavior of the endpoint are
// defined based on the provided struct fi_info" (fi_endpoint(3)). An
// entry getinfo answered, written to ep/N/info, makes the endpoint that
// one; before enable the attributes an application chooses are writable
// in attr/, within what the domain offers, by fi_getinfo's rules.
func TestEndpointFromInfo(t *testing.T) {
	d := mount(t)
	tr := d.tree(t)
	ans, err := tr.GetInfo("-p tcp -d lo -t FI_EP_RDM -c FI_TAGGED -v")
	if err != nil {
		t.Fatal(err)
	}
	block := ans[strings.Index(ans, "fi_info:"):]
	if i := strings.Index(block, "\n---"); i > 0 {
		block = block[:i+1]
	}
	ep, err := tr.Domain("tcp", "lo").NewEP()
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	info := d.path("tcp", "lo", "ep", ep.ID(), "info")
	if err := os.WriteFile(info, []byte(block), 0); err != nil {
		t.Fatalf("write info: %v (%s)", err, ep.Err())
	}
	attr := func(name string) string {
		v, err := ep.Attr(name)
		if err != nil {
			t.Fatalf("attr/%s: %v", name, err)
		}
		return strings.TrimSpace(v)
	}
	if got := attr("type"); got != "FI_EP_RDM" {
		t.Errorf("type after writing an FI_EP_RDM entry: %s", got)
	}
	// fi_getinfo(3): the capabilities asked for, not the entry's others.
	if got := attr("caps"); strings.Contains(got, "FI_RMA") || !strings.Contains(got, "FI_TAGGED") {
		t.Errorf("caps after writing an FI_TAGGED entry: %s", got)
	}
	if got, _ := os.ReadFile(info); !strings.Contains(string(got), "type: FI_EP_RDM") || !strings.HasPrefix(string(got), "fi_info:") {
		t.Errorf("info reads:\n%s", got)
	}

	// Narrowing: send-only capabilities; their rx side is empty.
	for _, w := range []struct{ name, value, want string }{
		{"caps", "FI_TAGGED|FI_SEND", "FI_SEND"},
		{"tx_inject_size", "16", "16"},
		{"tx_msg_order", "FI_ORDER_SAS", "[ FI_ORDER_SAS ]"},
		{"mem_tag_format", "0xffff", "0x000000000000ffff"},
	} {
		if err := ep.SetAttr(w.name, w.value); err != nil {
			t.Fatalf("attr/%s = %s: %v (%s)", w.name, w.value, err, ep.Err())
		}
		if got := attr(w.name); !strings.Contains(got, w.want) {
			t.Errorf("attr/%s after writing %s: %s", w.name, w.value, got)
		}
	}
	if got := attr("caps"); strings.Contains(got, "FI_RECV") {
		t.Errorf("send-only caps: %s", got)
	}
	if got := attr("rx_caps"); strings.Contains(got, "FI_RECV") {
		t.Errorf("send-only rx_caps: %s", got)
	}
	// Beyond what is offered: EINVAL, with fi_getinfo's reason.
	for _, w := range [][2]string{{"tx_inject_size", "100000"}, {"tx_msg_order", "FI_ORDER_RMA_RAR|FI_ORDER_ATOMIC_WAR"}} {
		if err := ep.SetAttr(w[0], w[1]); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("attr/%s = %s: %v, want EINVAL", w[0], w[1], err)
		} else if !strings.Contains(ep.Err(), "fi_getinfo") {
			t.Errorf("err after attr/%s = %s: %s", w[0], w[1], ep.Err())
		}
	}

	// An FI_EP_MSG endpoint of tcp has no atomics: an entry asking for them
	// matches nothing.
	msg, err := tr.Domain("tcp", "lo").NewEP()
	if err != nil {
		t.Fatal(err)
	}
	defer msg.Close()
	if err := msg.SetAttr("caps", "FI_ATOMIC"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("FI_ATOMIC on a tcp FI_EP_MSG endpoint: %v, want EINVAL", err)
	}
	// Operation flags the endpoint does not honour are refused, not kept
	// and ignored: FI_MULTICAST (not offered), FI_COMMIT_COMPLETE (no
	// persistent memory), FI_MULTI_RECV on tcp's FI_EP_MSG, a capability.
	for _, f := range [][2]string{{"tx_op_flags", "FI_MULTICAST"}, {"tx_op_flags", "FI_COMMIT_COMPLETE"},
		{"rx_op_flags", "FI_MULTI_RECV"}, {"tx_op_flags", "FI_MSG"}} {
		if err := msg.SetAttr(f[0], f[1]); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s = %s on a tcp FI_EP_MSG endpoint: %v, want EINVAL", f[0], f[1], err)
		}
	}
	if err := msg.SetAttr("tx_op_flags", "FI_DELIVERY_COMPLETE|FI_COMPLETION"); err != nil {
		t.Errorf("tx_op_flags FI_DELIVERY_COMPLETE|FI_COMPLETION: %v", err)
	}
	bad := strings.Replace(block, "type: FI_EP_RDM", "type: FI_EP_MSG", 1)
	bad = strings.Replace(bad, "caps: [ FI_TAGGED", "caps: [ FI_ATOMIC, FI_TAGGED", 1)
	if err := os.WriteFile(d.path("tcp", "lo", "ep", msg.ID(), "info"), []byte(bad), 0); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("an FI_EP_MSG entry with FI_ATOMIC: %v, want ENODATA", err)
	}

	// After enable, the entry is fixed.
	av, err := tr.Domain("tcp", "lo").NewAV()
	if err != nil {
		t.Fatal(err)
	}
	defer av.Close()
	cq, err := tr.Domain("tcp", "lo").NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	for _, c := range []string{"bind av " + av.ID(), "bind cq " + cq.ID() + " send", "enable"} {
		mustCtlObj(t, &ep.Object, c) // send-only: no receive CQ needed
	}
	if err := os.WriteFile(info, []byte(block), 0); !errors.Is(err, syscall.EBADFD) {
		t.Errorf("write info after enable: %v, want EBADFD", err)
	}
	if err := ep.SetAttr("caps", "FI_TAGGED"); !errors.Is(err, syscall.EBADFD) {
		t.Errorf("attr/caps after enable: %v, want EBADFD", err)
	}
}
