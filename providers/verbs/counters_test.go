package verbs

import (
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// countersOf reads a domain's device counters by "dir/name".
func countersOf(d *domain) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range d.DeviceCounters() {
		m[c.Dir+"/"+c.Name] = c.Value
	}
	return m
}

// TestDeviceCounters: messages over a device that drops, duplicates and
// reorders what it sends move its packet, retransmit and sequence-error
// counters, and the port counters agree with the driver's.
func TestDeviceCounters(t *testing.T) {
	shortTimers(t)
	p, da, db := twoDevices(t, &ibv.Fault{Drop: 0.2, Duplicate: 0.2, Reorder: 0.2, Seed: 5})
	before := countersOf(da)
	pr := connect(t, p, da, db)
	for i := range 40 {
		pr.srv.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 5000)})
		pr.cli.post(t, &core.Op{Kind: core.OpSend, Buf: pattern(4500, i)})
		if d := pr.cli.wait(t); d.c.Err != 0 {
			t.Fatalf("send %d: %+v", i, d.c)
		}
		if d := pr.srv.wait(t); d.c.Err != 0 || d.c.Len != 4500 {
			t.Fatalf("receive %d: %+v", i, d.c)
		}
	}
	a, b := countersOf(da), countersOf(db)
	if len(a) != len(deviceCounters) {
		t.Fatalf("%d counters, want %d: %v", len(a), len(deviceCounters), a)
	}
	// 40 messages of 4500 bytes are at least 80 packets each way's data.
	if a["hw_counters/sent_pkts"]-before["hw_counters/sent_pkts"] < 80 || b["hw_counters/rcvd_pkts"] < 80 {
		t.Errorf("packets: sender sent %d, receiver received %d", a["hw_counters/sent_pkts"], b["hw_counters/rcvd_pkts"])
	}
	if a["hw_counters/retransmits"] == 0 {
		t.Errorf("no retransmits with a fifth of the packets dropped: %v", a)
	}
	if a["hw_counters/rcvd_seq_err"]+a["hw_counters/local_ack_timeout_err"] == 0 {
		t.Errorf("no sequence-error NAK nor timeout at the sender: %v", a)
	}
	if b["hw_counters/out_of_seq_request"]+b["hw_counters/duplicate_request"] == 0 {
		t.Errorf("the receiver saw neither out-of-sequence nor duplicate requests: %v", b)
	}
	for _, m := range []map[string]uint64{a, b} {
		if m["counters/port_xmit_packets"] != m["hw_counters/sent_pkts"] || m["counters/port_rcv_packets"] != m["hw_counters/rcvd_pkts"] {
			t.Errorf("port counters differ from the driver's: %v", m)
		}
	}
}
