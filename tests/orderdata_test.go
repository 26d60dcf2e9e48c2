package tests

import (
	"strconv"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core/ring"
)

// TestOrderData: fi_endpoint(3) FI_ORDER_DATA: "When set, this bit
// indicates that received data is written into memory in order. Data
// ordering applies to memory accessed as part of a single operation and
// between operations if message ordering is guaranteed." verbs FI_EP_MSG
// has it in rx_comp_order. The target watches its region while an 8 MiB
// RMA write fills it, reading one byte per 4 KiB (a whole number of
// packets: a packet's bytes may land in any order, packets in order) from
// the end to the start: once it has seen a new byte, every byte before it,
// read later, must be new too.
func TestOrderData(t *testing.T) {
	const n, step = 8 << 20, 4096
	d := mount(t)
	dom := d.tree(t).Domain("verbs", verbsDevice)
	eq, err := dom.NewEQ()
	if err != nil {
		t.Fatal(err)
	}
	defer eq.Close()
	cqA, err := dom.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	defer cqA.Close()
	cqB, err := dom.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	defer cqB.Close()
	a, b, pep, err := dom.Connect(eq, cqA, cqB)
	if err != nil {
		t.Fatal(err)
	}
	defer pep.Close()
	defer a.Close()
	if order, err := b.Attr("rx_comp_order"); err != nil || !strings.Contains(order, "FI_ORDER_DATA") {
		t.Fatalf("verbs FI_EP_MSG rx_comp_order %q, %v: want FI_ORDER_DATA", order, err)
	}
	src, err := dom.NewMR(n, "FI_WRITE,FI_READ,FI_SEND,FI_RECV")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := dom.NewMR(n, "FI_REMOTE_WRITE,FI_REMOTE_READ")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	ks, err := dst.Attr("key")
	if err != nil {
		t.Fatal(err)
	}
	key, err := strconv.ParseUint(strings.TrimSpace(ks), 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	mem := dst.Mem()
	caught := 0 // scans that saw the write under way
	for round := 1; round <= 8; round++ {
		v := byte(round)
		for i := range src.Mem() {
			src.Mem()[i] = v
		}
		if err := a.Post(src, ring.WR{Op: ring.OpWrite, Context: uint64(round), Len: n, RMAKey: key}); err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			seen, all := -1, true
			for i := n - step; i >= 0; i -= step {
				switch {
				case mem[i] == v:
					if seen < 0 {
						seen = i
					}
				case seen >= 0:
					t.Fatalf("round %d: byte %d is new while byte %d, read after it, is not: placed out of order", round, seen, i)
				default:
					all = false
				}
			}
			if !all && seen >= 0 {
				caught++
			}
			done = all
		}
		if c := pollN(t, cqA, 1)[0]; c.Err != 0 || c.Context != uint64(round) {
			t.Fatalf("round %d: write completion %+v", round, c)
		}
	}
	t.Logf("%d scans saw a write under way", caught)
}
