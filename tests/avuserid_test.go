package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core/ring"
)

// TestAVUserID: FI_AV_USER_ID, "Requests that the provider support the
// association of a user specified identifier with each address vector
// (AV) address. User identifiers are returned with completion data in
// place of the AV address." (fi_getinfo(3)). The AV's insert_id verb is
// fi_av_insert with FI_AV_USER_ID ("the caller must specify an fi_addr_t
// identifier value to associate with each address ... Note that the
// output from the AV insertion call is unchanged.", fi_av(3)): addrs
// shows the id beside the entry's fi_addr, sends still name the fi_addr,
// and an endpoint with FI_AV_USER_ID in its caps gets the id as the
// sender of a message, while one without gets the fi_addr.
func TestAVUserID(t *testing.T) {
	d := mount(t)
	domain := d.tree(t).Domain("tcp", "lo")
	a := newRDMNodeWith(t, domain, "caps", "FI_MSG|FI_TAGGED|FI_SOURCE|FI_AV_USER_ID")
	plain := newRDMNode(t, domain)
	b := newRDMNode(t, domain)
	const id = 0xabc0000000000123
	for _, n := range []*rdmNode{a, plain} {
		if err := n.av.Ctl("insert_id 12379 " + strings.TrimSpace(plain.addr)); err != nil { // an entry before, at fi_addr 0
			t.Fatal(err)
		}
		if err := n.av.Ctl("insert_id 0xabc0000000000123 " + strings.TrimSpace(b.addr)); err != nil {
			t.Fatal(err)
		}
	}
	addrs, err := os.ReadFile(filepath.Join(a.av.Dir, "addrs"))
	if err != nil {
		t.Fatal(err)
	}
	want := "0 " + strings.TrimSpace(plain.addr) + " user_id=12379\n1 " + strings.TrimSpace(b.addr) + " user_id=12375891776014123299\n" // 0xabc0000000000123
	if string(addrs) != want {
		t.Errorf("addrs %q, want %q", addrs, want)
	}
	aInB, plainInB := b.insert(t, a), b.insert(t, plain)
	for _, c := range []struct {
		n    *rdmNode
		dest uint64
		want uint64
	}{{a, aInB, id}, {plain, plainInB, 1}} {
		c.n.post(t, ring.WR{Op: ring.OpRecv, Context: 1, Offset: 0, Len: 64, Addr: anyAddr})
		b.post(t, ring.WR{Op: ring.OpSend, Context: 2, Offset: 0, Len: 8, Addr: c.dest})
		if e := c.n.recvDone(t); e.Err != 0 || e.SrcAddr != c.want {
			t.Errorf("%s: receive from b: %+v, want src %#x", c.n.ep.Name(), e, c.want)
		}
	}
	// A send names the fi_addr, not the id.
	a.post(t, ring.WR{Op: ring.OpSend, Context: 3, Offset: 0, Len: 8, Addr: 1})
	b.post(t, ring.WR{Op: ring.OpRecv, Context: 4, Offset: 0, Len: 64, Addr: anyAddr})
	if e := b.recvDone(t); e.Err != 0 || e.Context != 4 {
		t.Errorf("b's receive of a's send to fi_addr 1: %+v", e)
	}
	for _, bad := range []string{"insert_id x " + strings.TrimSpace(b.addr), "insert_id 1", "insert_id 1 nowhere"} {
		if err := a.av.Ctl(bad); err == nil {
			t.Errorf("%q succeeded", bad)
		}
	}
}
