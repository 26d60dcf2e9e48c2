package core_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// TestRecord: a Record's line shows its fields in order, bare ones without
// their key and hidden ones not at all; its JSON has every key, in order.
func TestRecord(t *testing.T) {
	r := core.Record{
		{Key: "state", JSON: "idle", Text: "idle", Bare: true},
		{Key: "size", JSON: 8, Text: "8"},
		{Key: "eq", JSON: nil, Text: "-"},
		{Key: "tag", JSON: nil, Text: "0x0/0x0", Hide: true},
		{Key: "flags", JSON: []string{"FI_MSG"}, Text: "FI_MSG"},
	}
	if got, want := r.String(), "idle size=8 eq=- flags=FI_MSG"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	b, err := json.Marshal(r)
	if got, want := string(b), `{"state":"idle","size":8,"eq":null,"tag":null,"flags":["FI_MSG"]}`; err != nil || got != want {
		t.Errorf("JSON %s (%v), want %s", got, err, want)
	}
	if b, err := json.Marshal(core.Record{}); err != nil || string(b) != "{}" {
		t.Errorf("empty record: %s (%v)", b, err)
	}
	// A value encoding/json refuses fails the marshal, naming the field.
	if _, err := json.Marshal(core.Record{{Key: "f", JSON: func() {}}}); err == nil || !strings.Contains(err.Error(), "f:") {
		t.Errorf("unmarshalable field: %v", err)
	}
}

// TestEntryLines: a CQ entry's and an EQ event's lines are the ones
// docs/tree.md shows, and their JSON has every key, null where the line
// leaves a field out.
func TestEntryLines(t *testing.T) {
	for _, c := range []struct {
		v          interface{ String() string }
		line, json string
	}{
		{core.CQEntry{Flags: fi.CQFlags(fi.SEND | fi.MSG), Len: 6, Src: uint64(fi.ADDR_NOTAVAIL)},
			"op_context=0x0 flags=FI_SEND|FI_MSG len=6 buf=0x0 data=0x0 tag=0x0",
			`{"op_context":0,"flags":["FI_SEND","FI_MSG"],"len":6,"buf":0,"data":0,"tag":0,"src":null,"err":null,"prov_errno":0,"olen":0,"err_data":null}`},
		{core.CQEntry{Context: 0x10, Flags: fi.CQFlags(fi.RECV | fi.MSG), Len: 4, Src: 2, Err: fi.ETRUNC, ProvErrno: 5, OLen: 3},
			"op_context=0x10 flags=FI_RECV|FI_MSG len=4 buf=0x0 data=0x0 tag=0x0 src=2 err=FI_ETRUNC prov_errno=5 olen=3",
			`{"op_context":16,"flags":["FI_RECV","FI_MSG"],"len":4,"buf":0,"data":0,"tag":0,"src":2,"err":"FI_ETRUNC","prov_errno":5,"olen":3,"err_data":null}`},
		{core.CQEntry{Context: 0x11, Flags: fi.CQFlags(fi.RECV | fi.MSG), Len: 2, Src: uint64(fi.ADDR_NOTAVAIL), Err: fi.EADDRNOTAVAIL,
			Unknown: fi.Addr{Format: fi.SOCKADDR_IN, IP: netip.MustParseAddrPort("127.0.0.1:7000")}},
			"op_context=0x11 flags=FI_RECV|FI_MSG len=2 buf=0x0 data=0x0 tag=0x0 err=FI_EADDRNOTAVAIL prov_errno=0 olen=0 err_data=fi_sockaddr_in://127.0.0.1:7000",
			`{"op_context":17,"flags":["FI_RECV","FI_MSG"],"len":2,"buf":0,"data":0,"tag":0,"src":null,"err":"FI_EADDRNOTAVAIL","prov_errno":0,"olen":0,"err_data":"fi_sockaddr_in://127.0.0.1:7000"}`},
		{core.EQEvent{Event: fi.CONNREQ, FID: "pep/0", EP: "4", Data: []byte("hello world")},
			"connreq fid=pep/0 ep=4 data='hello world'",
			`{"event":"connreq","fid":"pep/0","ep":"4","err":null,"prov_errno":0,"data":"hello world"}`},
		{core.EQEvent{FID: "ep/1", Err: fi.ECONNREFUSED, ProvErrno: 111, Data: []byte{0, 1}},
			"error fid=ep/1 err=FI_ECONNREFUSED prov_errno=111 data=hex:0001",
			`{"event":"error","fid":"ep/1","ep":null,"err":"FI_ECONNREFUSED","prov_errno":111,"data":"hex:0001"}`},
	} {
		if got := c.v.String(); got != c.line {
			t.Errorf("line %q, want %q", got, c.line)
		}
		if b, err := json.Marshal(c.v); err != nil || string(b) != c.json {
			t.Errorf("JSON %s (%v), want %s", b, err, c.json)
		}
	}
}

// TestAttrsRecord: attr.json types each value by its file's format.
func TestAttrsRecord(t *testing.T) {
	attr := func(name, v string) core.Attr { return core.Attr{Name: name, Get: func() string { return v }} }
	r := core.AttrsRecord([]core.Attr{
		attr("size", "1024\n"),
		attr("mem_tag_format", "0x0000aaaa"),
		attr("engine_cpu", "-1"),
		attr("tx_size_left", "-"),
		attr("scalable", "false"),
		attr("caps", "[ FI_MSG, FI_SEND ]"),
		attr("mode", "[  ]"),
		attr("type", "FI_EP_MSG"),
		attr("api_version", "1.17"),
		attr("context", "tx 3"),
	})
	b, err := json.Marshal(r)
	want := `{"size":1024,"mem_tag_format":43690,"engine_cpu":-1,"tx_size_left":null,"scalable":false,` +
		`"caps":["FI_MSG","FI_SEND"],"mode":[],"type":"FI_EP_MSG","api_version":"1.17","context":"tx 3"}`
	if err != nil || string(b) != want {
		t.Errorf("attr.json %s (%v), want %s", b, err, want)
	}
}

// TestStatusLines: an endpoint's status line keeps its form with the data
// file's parameters set, and its JSON has them as values.
func TestStatusLines(t *testing.T) {
	d := lo(t)
	ep, err := d.Create(core.KindEP, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Remove() })
	st := ep.Status()
	if got, want := st.String(), "ep s msg idle cq=-/- eq=- av=- cntr=- ops=0 local=- remote=-"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	b, err := json.Marshal(st)
	want := `{"kind":"ep","id":"s","type":"msg","state":"idle","cq":{"send":null,"recv":null},"eq":null,"av":null,` +
		`"cntr":{"send":null,"recv":null,"read":null,"write":null,"remote_read":null,"remote_write":null},"ops":0,` +
		`"local":null,"remote":null,"tag":null,"src":null,"cqdata":null,"rxbuf":null}`
	if err != nil || string(b) != want {
		t.Errorf("status.json %s (%v), want %s", b, err, want)
	}
	run(t, ep, "cqdata 5")
	run(t, ep, "rxbuf 64")
	if got, want := ep.Status().String(), "ep s msg idle cq=-/- eq=- av=- cntr=- ops=0 local=- remote=- cqdata=0x5 rxbuf=64"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	var j map[string]any
	b, _ = json.Marshal(ep.Status())
	if err := json.Unmarshal(b, &j); err != nil || j["cqdata"] != 5.0 || j["rxbuf"] != 64.0 || j["tag"] != nil {
		t.Errorf("status.json %s (%v)", b, err)
	}
}

// TestErrInfo: err.json's parts of the err line.
func TestErrInfo(t *testing.T) {
	d := lo(t)
	ep, err := d.Create(core.KindEP, "e", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Remove() })
	if e := ep.ErrInfo(); e.Err != nil || e.Op != nil || e.Reason != nil || e.Code != nil {
		t.Errorf("before any error: %+v", e)
	}
	ep.SetErr(core.WithOp("bind cq 9 send", core.Errorf(fi.ENOENT, "no such cq in domain lo")))
	e := ep.ErrInfo()
	if e.Err == nil || *e.Err != ep.Err() || *e.Err != "bind cq 9 send: no such cq in domain lo" ||
		e.Op == nil || *e.Op != "bind cq 9 send" || e.Reason == nil || *e.Reason != "no such cq in domain lo" ||
		e.Code == nil || *e.Code != "FI_ENOENT" {
		b, _ := json.Marshal(e)
		t.Errorf("err.json %s", b)
	}
}
