package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestSourceErr: an FI_EP_RDM endpoint that asks for FI_SOURCE_ERR ("Must
// be paired with FI_SOURCE. When specified, this requests that raw source
// addressing data be returned as part of completion data for any address
// that has not been inserted into the local address vector.",
// fi_getinfo(3)) reports a message from a sender its AV does not hold as
// an error completion: "An error code of FI_EADDRNOTAVAIL indicates that
// the data transfer was successfully received and processed ... The
// err_data field will be set to the source address data. ... This may be
// passed directly into an fi_av_insert call to add the source address to
// the address vector." (fi_cq(3)). The message is in the buffer, err_data
// is the sender's address; once it is inserted, the next message from it
// completes with its fi_addr. An endpoint that did not ask keeps
// FI_ADDR_NOTAVAIL (TestRDMRings), and its caps have no FI_SOURCE_ERR.
func TestSourceErr(t *testing.T) {
	d := mountWith(t)
	tr := d.tree(t)
	for _, dom := range []string{"tcp/lo", "verbs/" + verbsDevice} {
		t.Run(dom, func(t *testing.T) {
			prov, name, _ := strings.Cut(dom, "/")
			domain := tr.Domain(prov, name)
			plain := newRDMNode(t, domain)
			caps, err := plain.ep.Attr("caps")
			if err != nil {
				t.Fatal(err)
			}
			caps = strings.TrimSpace(caps)
			if strings.Contains(caps, "FI_SOURCE_ERR") || !strings.Contains(caps, "FI_SOURCE") {
				t.Fatalf("a default RDM endpoint's caps: %s", caps)
			}
			a := newRDMNodeWith(t, domain, "caps", sourceErrCaps)
			if got, _ := a.ep.Attr("caps"); !strings.Contains(got, "FI_SOURCE_ERR") {
				t.Fatalf("caps with FI_SOURCE_ERR: %s", got)
			}
			b := newRDMNode(t, domain)
			aInB := b.insert(t, a)
			copy(b.mr.Mem(), "who am I")
			a.post(t, ring.WR{Op: ring.OpRecv, Context: 1, Offset: 0, Len: 64, Addr: anyAddr})
			b.post(t, ring.WR{Op: ring.OpSend, Context: 2, Offset: 0, Len: 8, Addr: aInB})
			e := a.recvDone(t)
			if e.Err != -int32(fi.EADDRNOTAVAIL) || e.Context != 1 || e.SrcAddr != uint64(fi.ADDR_NOTAVAIL) || e.Len != 8 ||
				string(a.mr.Mem()[e.Buf:][:e.Len]) != "who am I" {
				t.Fatalf("receive from a sender outside the AV: %+v %q", e, a.mr.Mem()[:8])
			}
			src, ok := fi.SockaddrAddr(e.ErrData[:])
			if !ok || src.String() != strings.TrimSpace(b.addr) {
				t.Fatalf("err_data % x is %v, want %s", e.ErrData, src, b.addr)
			}
			bInA, err := a.av.Insert(src.String())
			if err != nil {
				t.Fatal(err)
			}
			a.post(t, ring.WR{Op: ring.OpRecv, Context: 3, Offset: 0, Len: 64, Addr: anyAddr})
			b.post(t, ring.WR{Op: ring.OpSend, Context: 4, Offset: 0, Len: 8, Addr: aInB})
			if e := a.recvDone(t); e.Err != 0 || e.Context != 3 || e.SrcAddr != bInA {
				t.Fatalf("receive once the sender is inserted: %+v, want src %d", e, bInA)
			}
		})
	}
}

// sourceErrCaps are the capabilities of the endpoints that ask for
// FI_SOURCE_ERR.
const sourceErrCaps = "FI_MSG|FI_TAGGED|FI_SOURCE|FI_SOURCE_ERR"

// TestSourceErrEvents: cq/N/events shows an FI_EADDRNOTAVAIL completion
// with the sender's address as err_data.
func TestSourceErrEvents(t *testing.T) {
	d := mountWith(t)
	domain := d.tree(t).Domain("tcp", "lo")
	a := newRDMNodeWith(t, domain, "caps", sourceErrCaps)
	b := newRDMNode(t, domain)
	aInB := b.insert(t, a)
	a.post(t, ring.WR{Op: ring.OpRecv, Context: 1, Offset: 0, Len: 64, Addr: anyAddr})
	b.post(t, ring.WR{Op: ring.OpSend, Context: 2, Offset: 0, Len: 8, Addr: aInB})
	if err := a.cq.Wait(10e9); err != nil {
		t.Fatal(err)
	}
	ev, err := os.ReadFile(filepath.Join(a.cq.Dir, "events"))
	if err != nil {
		t.Fatal(err)
	}
	want := "err=FI_EADDRNOTAVAIL prov_errno=0 olen=0 err_data=" + strings.TrimSpace(b.addr) + "\n"
	if !strings.HasSuffix(string(ev), want) {
		t.Errorf("events: %q, want a line ending %q", ev, want)
	}
}
