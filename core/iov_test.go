package core_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
	"github.com/fabricfs/fabricfs/providers/rxm"
	"github.com/fabricfs/fabricfs/providers/shm"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// iovRig is two endpoints A and B that reach each other, sharing a CQ,
// and one region m of 8 KiB both use (with remote access), mapped.
type iovRig struct {
	a, b          *core.Object
	atx, arx, btx *ring.Ring
	to            map[*ring.Ring]uint64 // the fi_addr a ring's requests name (FI_EP_RDM)
	cq            *ring.Ring
	mem           []byte
	desc, key     uint64
	cqes          []ring.CQE
	rmaLimit      int // the endpoints' rma_iov_limit
}

// iovSetups make the endpoint pairs the scatter-gather tests run on: tcp
// and verbs FI_EP_MSG, and FI_EP_RDM (rxm) over each.
var iovSetups = []struct {
	name string
	make func(t *testing.T) (d *core.Domain, a, b *core.Object, cq *core.CQ, addrs bool)
}{
	{"tcp MSG", func(t *testing.T) (*core.Domain, *core.Object, *core.Object, *core.CQ, bool) {
		d := lo(t)
		a, b, _, _, cq := pair(t, d, "bind cq c send,recv")
		return d, a, b, cq, false
	}},
	{"verbs MSG", func(t *testing.T) (*core.Domain, *core.Object, *core.Object, *core.CQ, bool) {
		d := verbsDomain(t)
		a, b, _, _, cq := pair(t, d, "bind cq c send,recv")
		return d, a, b, cq, false
	}},
	{"tcp RDM", func(t *testing.T) (*core.Domain, *core.Object, *core.Object, *core.CQ, bool) {
		p, err := tcp.New(tcp.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_, d := fabricOf(t, rxm.Wrap(p))
		return rdmPair(t, d)
	}},
	{"verbs RDM", func(t *testing.T) (*core.Domain, *core.Object, *core.Object, *core.CQ, bool) {
		return rdmPair(t, verbsDomainOf(t, rxm.Wrap(verbsProvider(t))))
	}},
	{"shm RDM", func(t *testing.T) (*core.Domain, *core.Object, *core.Object, *core.CQ, bool) {
		return rdmPair(t, shmDomain(t))
	}},
}

// shmDomain is the domain of a fabric of the shm provider alone.
func shmDomain(t *testing.T) *core.Domain {
	t.Helper()
	f, err := core.New(shm.New())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	d, ok := f.Domain(shm.ProvName, shm.DomainName)
	if !ok {
		t.Fatal("no shm/shm domain")
	}
	return d
}

// rdmPair makes two enabled FI_EP_RDM endpoints a and b of d bound to one
// AV (a is fi_addr 0, b 1) and one CQ.
func rdmPair(t *testing.T, d *core.Domain) (*core.Domain, *core.Object, *core.Object, *core.CQ, bool) {
	av := create(t, d, core.KindAV, "v").Impl.(*core.AV)
	cq := create(t, d, core.KindCQ, "c").Impl.(*core.CQ)
	var eps []*core.Object
	var addrs []fi.Addr
	for _, name := range []string{"a", "b"} {
		ep := create(t, d, core.KindEP, name)
		setAttr(t, ep, "type", "FI_EP_RDM")
		for _, c := range []string{"bind av v", "bind cq c send,recv", "enable"} {
			run(t, ep, c)
		}
		a, err := ep.Impl.(*core.EP).Name()
		if err != nil {
			t.Fatal(err)
		}
		eps, addrs = append(eps, ep), append(addrs, a)
	}
	if _, err := av.Insert(addrs); err != nil { // a is fi_addr 0, b 1
		t.Fatal(err)
	}
	return d, eps[0], eps[1], cq, true
}

func newIOVRig(t *testing.T, setup func(t *testing.T) (*core.Domain, *core.Object, *core.Object, *core.CQ, bool)) *iovRig {
	t.Helper()
	d, a, b, cq, addrs := setup(t)
	mr, err := regMR(t, d, "m", 8192, "", "FI_SEND,FI_RECV,FI_READ,FI_WRITE,FI_REMOTE_READ,FI_REMOTE_WRITE")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := mr.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	g := &iovRig{a: a, b: b, mem: reg.Mem, desc: mr.Serial, key: mr.Impl.(*core.MR).Key(), to: map[*ring.Ring]uint64{}}
	g.atx, g.arx = ringsOf(t, a)
	g.btx, _ = ringsOf(t, b)
	if addrs {
		g.to[g.atx], g.to[g.arx], g.to[g.btx] = 1, 1, 0
	}
	creg, err := cq.Region()
	if err != nil {
		t.Fatal(err)
	}
	if g.cq, err = ring.Open(creg.Mem); err != nil {
		t.Fatal(err)
	}
	if f := g.atx.Features(); f&ring.FeatIOV == 0 {
		t.Errorf("tx ring features %#x: no FEAT_IOV", f)
	}
	for _, at := range a.Impl.Attrs() {
		if at.Name == "tx_rma_iov_limit" {
			g.rmaLimit, _ = strconv.Atoi(strings.TrimSpace(at.Get()))
		}
	}
	return g
}

// forEachSetup runs test on every setup of iovSetups.
func forEachSetup(t *testing.T, test func(t *testing.T, g *iovRig)) {
	for _, s := range iovSetups {
		t.Run(s.name, func(t *testing.T) { test(t, newIOVRig(t, s.make)) })
	}
}

// post writes the segment array of local and remote at arr in m and
// publishes w, in the segment-array form over it, on r.
func (g *iovRig) post(t *testing.T, r *ring.Ring, w ring.WR, arr uint64, local []ring.Seg, remote []ring.RMASeg) {
	t.Helper()
	n := uint64(len(local)+len(remote)) * ring.SegSize
	ring.EncodeSegs(g.mem[arr:arr+n], local, remote)
	w.IOVCount, w.RMAIOVCount = uint8(len(local)), uint8(len(remote))
	w.Desc, w.Offset, w.Len, w.Addr = g.desc, arr, n, g.to[r]
	slot, ok := r.Reserve()
	if !ok {
		t.Fatal("ring full")
	}
	w.Encode(slot)
	r.Publish(1)
}

// completion waits for the completion with context ctx.
func (g *iovRig) completion(t *testing.T, ctx uint64) ring.CQE {
	t.Helper()
	for n := len(g.cqes) + 1; ; n++ {
		for i, c := range g.cqes {
			if c.Context == ctx {
				g.cqes = append(g.cqes[:i], g.cqes[i+1:]...)
				return c
			}
		}
		g.cqes = reapCQEs(t, g.cq, g.cqes, n, fmt.Sprintf("the completion of context %d", ctx))
	}
}

func sg(desc, off, n uint64) ring.Seg    { return ring.Seg{Desc: desc, Offset: off, Len: n} }
func rs(addr, n, key uint64) ring.RMASeg { return ring.RMASeg{Addr: addr, Len: n, Key: key} }

// segs are four local segments of m, of lengths 3, 10, 1 and 20, from base.
func segs(desc, base uint64) []ring.Seg {
	return []ring.Seg{sg(desc, base, 3), sg(desc, base+100, 10), sg(desc, base+200, 1), sg(desc, base+300, 20)}
}

// pattern fills the segments with distinct bytes and returns their
// concatenation.
func (g *iovRig) pattern(ss []ring.Seg, seed byte) []byte {
	var all []byte
	for _, s := range ss {
		for i := range s.Len {
			g.mem[s.Offset+i] = seed
			seed++
		}
		all = append(all, g.mem[s.Offset:s.Offset+s.Len]...)
	}
	return all
}

func (g *iovRig) gathered(ss []ring.Seg) []byte {
	var all []byte
	for _, s := range ss {
		all = append(all, g.mem[s.Offset:s.Offset+s.Len]...)
	}
	return all
}

// TestIOVSendRecv: a SEND of four segments into a RECV of four other
// segments places the gathered bytes, in order, across the receive's
// segments (fi_msg(3): fi_sendv, fi_recvv), completing with their total
// length and the first segment's desc and offset.
func TestIOVSendRecv(t *testing.T) { forEachSetup(t, testIOVSendRecv) }

func testIOVSendRecv(t *testing.T, g *iovRig) {
	rx, tx := segs(g.desc, 0), segs(g.desc, 1024)
	g.post(t, g.arx, ring.WR{Op: ring.OpRecv, Context: 1}, 4096, rx, nil)
	want := g.pattern(tx, 1)
	g.post(t, g.btx, ring.WR{Op: ring.OpSend, Context: 2}, 4200, tx, nil)
	if c := g.completion(t, 2); c.Err != 0 || c.Len != 34 || c.Flags != uint64(fi.MSG|fi.SEND) {
		t.Fatalf("send completion %+v", c)
	}
	c := g.completion(t, 1)
	if c.Err != 0 || c.Len != 34 || c.Desc != g.desc || c.Buf != 0 {
		t.Fatalf("receive completion %+v, want len 34, desc %#x, buf 0", c, g.desc)
	}
	if got := g.gathered(rx); !bytes.Equal(got, want) {
		t.Errorf("received %x, want %x", got, want)
	}

	// A shorter message fills the first segments only; a longer one
	// truncates, the segments holding its start.
	g.pattern(rx, 0)
	g.post(t, g.arx, ring.WR{Op: ring.OpRecv, Context: 3}, 4096, rx, nil)
	short := append([]byte(nil), g.mem[1024:1026]...)
	g.post(t, g.btx, ring.WR{Op: ring.OpSend, Context: 4}, 4200, []ring.Seg{sg(g.desc, 1024, 2)}, nil)
	g.completion(t, 4)
	if c := g.completion(t, 3); c.Err != 0 || c.Len != 2 || !bytes.Equal(g.mem[0:2], short) || g.mem[2] != 2 {
		t.Errorf("short receive %+v, segment 0 %x", c, g.mem[0:3])
	}
	g.post(t, g.arx, ring.WR{Op: ring.OpRecv, Context: 5}, 4096, rx[:2], nil)
	g.post(t, g.btx, ring.WR{Op: ring.OpSend, Context: 6}, 4200, tx, nil)
	g.completion(t, 6)
	if c := g.completion(t, 5); c.Err != -int32(fi.ETRUNC) || c.Len != 13 || c.OLen != 21 || !bytes.Equal(g.gathered(rx[:2]), want[:13]) {
		t.Errorf("truncated receive %+v, segments %x, want %x", c, g.gathered(rx[:2]), want[:13])
	}
}

// TestIOVWriteRead: a WRITE of four local segments into three remote
// ones puts the gathered bytes across the remote segments, and a READ of
// four remote segments into four local ones brings them back (fi_rma(3):
// fi_writemsg, fi_readmsg with rma_iov_count > 1); each completes once.
func TestIOVWriteRead(t *testing.T) { forEachSetup(t, testIOVWriteRead) }

func testIOVWriteRead(t *testing.T, g *iovRig) {
	if g.rmaLimit != 4 {
		t.Errorf("attr/tx_rma_iov_limit %d, want 4", g.rmaLimit)
	}
	local := segs(g.desc, 0)
	want := g.pattern(local, 7)
	remote := []ring.RMASeg{rs(2048, 5, g.key), rs(2100, 20, g.key), rs(2200, 9, g.key)}
	readFrom := []ring.RMASeg{rs(2048, 5, g.key), rs(2100, 20, g.key), rs(2200, 8, g.key), rs(2208, 1, g.key)}
	g.post(t, g.atx, ring.WR{Op: ring.OpWrite, Context: 1, Flags: uint64(fi.DELIVERY_COMPLETE)}, 4096, local, remote)
	if c := g.completion(t, 1); c.Err != 0 || c.Len != 34 || c.Flags != uint64(fi.RMA|fi.WRITE) {
		t.Fatalf("write completion %+v", c)
	}
	var got []byte
	for _, r := range remote {
		got = append(got, g.mem[r.Addr:r.Addr+r.Len]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("written %x, want %x", got, want)
	}

	back := segs(g.desc, 512)
	g.post(t, g.atx, ring.WR{Op: ring.OpRead, Context: 2}, 4096, back, readFrom)
	if c := g.completion(t, 2); c.Err != 0 || c.Len != 34 || c.Flags != uint64(fi.RMA|fi.READ) || c.Buf != 512 {
		t.Fatalf("read completion %+v", c)
	}
	if got := g.gathered(back); !bytes.Equal(got, want) {
		t.Errorf("read %x, want %x", got, want)
	}

	// One local and one remote segment is the plain form in an array.
	g.post(t, g.atx, ring.WR{Op: ring.OpRead, Context: 3}, 4096, []ring.Seg{sg(g.desc, 3000, 5)}, []ring.RMASeg{rs(2048, 5, g.key)})
	if c := g.completion(t, 3); c.Err != 0 || c.Len != 5 || !bytes.Equal(g.mem[3000:3005], want[:5]) {
		t.Errorf("one-segment read %+v, %x", c, g.mem[3000:3005])
	}
}

// TestIOVRejected: malformed segment arrays complete with -FI_EINVAL
// (docs/abi.md, "Requests the daemon rejects").
func TestIOVRejected(t *testing.T) {
	g := newIOVRig(t, iovSetups[0].make)
	five := append(segs(g.desc, 0), ring.Seg{Desc: g.desc, Offset: 400, Len: 1})
	bad := []struct {
		name   string
		w      ring.WR
		local  []ring.Seg
		remote []ring.RMASeg
		fix    func(w *ring.WR)
	}{
		{"five local segments", ring.WR{Op: ring.OpSend}, five, nil, nil},
		{"five remote segments", ring.WR{Op: ring.OpWrite}, segs(g.desc, 0)[:1],
			[]ring.RMASeg{rs(0, 1, g.key), rs(1, 1, g.key), rs(2, 1, g.key), rs(3, 0, g.key), rs(4, 1, g.key)}, nil},
		{"no local segment", ring.WR{Op: ring.OpWrite}, nil, []ring.RMASeg{rs(0, 1, g.key)}, nil},
		{"remote segments on a send", ring.WR{Op: ring.OpSend}, segs(g.desc, 0), []ring.RMASeg{rs(0, 34, g.key)}, nil},
		{"remote bytes unlike local", ring.WR{Op: ring.OpWrite}, segs(g.desc, 0), []ring.RMASeg{rs(0, 33, g.key)}, nil},
		{"segment outside the region", ring.WR{Op: ring.OpSend}, []ring.Seg{sg(g.desc, 8190, 3), sg(g.desc, 0, 1)}, nil, nil},
		{"segment in no region", ring.WR{Op: ring.OpSend}, []ring.Seg{sg(g.desc+1000, 0, 3), sg(g.desc, 0, 1)}, nil, nil},
		{"array length unlike its counts", ring.WR{Op: ring.OpSend}, segs(g.desc, 0), nil, func(w *ring.WR) { w.Len -= 8 }},
		{"FI_INJECT beyond inject_size", ring.WR{Op: ring.OpSend, Flags: uint64(fi.INJECT)},
			[]ring.Seg{sg(g.desc, 0, 4000), sg(g.desc, 4000, 1000)}, nil, nil},
	}
	for i, b := range bad {
		w := b.w
		w.Context = uint64(100 + i)
		n := uint64(len(b.local)+len(b.remote)) * ring.SegSize
		ring.EncodeSegs(g.mem[4096:4096+n], b.local, b.remote)
		w.IOVCount, w.RMAIOVCount = uint8(len(b.local)), uint8(len(b.remote))
		w.Desc, w.Offset, w.Len = g.desc, 4096, n
		if b.fix != nil {
			b.fix(&w)
		}
		slot, _ := g.atx.Reserve()
		w.Encode(slot)
		g.atx.Publish(1)
		if c := g.completion(t, w.Context); c.Err != -int32(fi.EINVAL) {
			t.Errorf("%s: completion %+v, want -FI_EINVAL", b.name, c)
		}
	}
}

// TestIOVAtomicRejected: an atomic in the segment-array form (atomics
// take one buffer: fi_atomicv's count is 1 here) completes with
// -FI_EINVAL.
func TestIOVAtomicRejected(t *testing.T) {
	g := newAtomicRig(t)
	ring.EncodeSegs(g.mem[1024:1024+ring.SegSize], []ring.Seg{sg(g.mr.Serial, 0, 8)}, nil)
	c := g.post(t, ring.WR{Op: ring.OpAtomic, Context: 1, IOVCount: 1, Offset: 1024, Len: ring.SegSize,
		Datatype: uint8(fi.UINT64), AtomicOp: uint8(fi.SUM), RMAAddr: 2048})
	if c.Err != -int32(fi.EINVAL) {
		t.Errorf("atomic with a segment array: completion %+v, want -FI_EINVAL", c)
	}
}

// TestIOVSharedReceiveContext: a shared receive context takes one buffer
// per receive, and says so: its attr/iov_limit is 1, where its domain's
// endpoints have 4.
func TestIOVSharedReceiveContext(t *testing.T) {
	d := lo(t)
	attr := func(o *core.Object, name string) string {
		for _, a := range o.Impl.Attrs() {
			if a.Name == name {
				return strings.TrimSpace(a.Get())
			}
		}
		t.Fatalf("%s has no attribute %s", o.ID, name)
		return ""
	}
	if v := attr(create(t, d, core.KindSRX, "s"), "iov_limit"); v != "1" {
		t.Errorf("srx attr/iov_limit %s, want 1", v)
	}
	if v := attr(create(t, d, core.KindEP, "e"), "rx_iov_limit"); v != "4" {
		t.Errorf("ep attr/rx_iov_limit %s, want 4", v)
	}
}

// FuzzIOVRequest posts one transmit work request in the segment-array
// form, with an arbitrary op, flags, counts and array, on a fresh tcp
// pair: the daemon must not panic, and the request must complete (with
// an error, or not). A segment's desc or key of 0 in the array stands for
// the pair's region, so that the fuzzer reaches valid segments too.
func FuzzIOVRequest(f *testing.F) {
	arr := func(local []ring.Seg, remote []ring.RMASeg) []byte {
		b := make([]byte, (len(local)+len(remote))*ring.SegSize)
		ring.EncodeSegs(b, local, remote)
		return b
	}
	four := segs(0, 0)
	f.Add(ring.OpSend, uint64(0), uint8(4), uint8(0), arr(four, nil))
	f.Add(ring.OpSend, uint64(fi.INJECT), uint8(2), uint8(0), arr(four[:2], nil))
	f.Add(ring.OpWrite, uint64(fi.REMOTE_CQ_DATA), uint8(4), uint8(2), arr(four, []ring.RMASeg{rs(2048, 30, 0), rs(3000, 4, 0)}))
	f.Add(ring.OpRead, uint64(0), uint8(1), uint8(4), arr(four[:1], []ring.RMASeg{rs(2048, 1, 0), rs(2049, 1, 0), rs(2050, 0, 0), rs(2051, 1, 0)}))
	f.Add(ring.OpRead, uint64(0), uint8(2), uint8(1), arr(four[:2], []ring.RMASeg{rs(2048, 13, 99)}))
	f.Add(ring.OpAtomic, uint64(0), uint8(1), uint8(0), arr(four[:1], nil))
	f.Add(ring.OpSend, uint64(0), uint8(200), uint8(255), []byte{1, 2, 3})
	f.Fuzz(fuzzOne)
}

// fuzzOne is one input of FuzzIOVRequest.
func fuzzOne(t *testing.T, op uint8, flags uint64, n, m uint8, a []byte) {
	if len(a) > 512 {
		a = a[:512]
	}
	g := newIOVRig(t, iovSetups[0].make)
	a = bytes.Clone(a)
	for i := 0; i+ring.SegSize <= len(a); i += ring.SegSize {
		if i/ring.SegSize < int(n) && ne64(a[i:]) == 0 {
			put64(a[i:], g.desc)
		} else if i/ring.SegSize >= int(n) && ne64(a[i+16:]) == 0 {
			put64(a[i+16:], g.key)
		}
	}
	copy(g.mem[4096:], a)
	slot, ok := g.atx.Reserve()
	if !ok {
		t.Fatal("tx ring full")
	}
	(&ring.WR{Op: op, Flags: flags, Context: 1, IOVCount: n, RMAIOVCount: m, Desc: g.desc, Offset: 4096,
		Len: uint64(len(a))}).Encode(slot)
	g.atx.Publish(1)
	g.completion(t, 1)
}

func ne64(b []byte) uint64     { return binary.NativeEndian.Uint64(b) }
func put64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }

// TestIOVWriteData: a WRITE of several remote segments with
// FI_REMOTE_CQ_DATA makes one entry at the target, with the data, once
// every segment's bytes are in place (the data goes with the last part).
func TestIOVWriteData(t *testing.T) {
	for _, s := range iovSetups {
		if strings.HasPrefix(s.name, "verbs") {
			continue // verbs's remote CQ data takes a posted receive (FI_RX_CQ_DATA): TestRemoteCQData
		}
		t.Run(s.name, func(t *testing.T) {
			g := newIOVRig(t, s.make)
			local := segs(g.desc, 0)
			want := g.pattern(local, 3)
			remote := []ring.RMASeg{rs(2048, 20, g.key), rs(2100, 10, g.key), rs(2200, 4, g.key)}
			g.post(t, g.atx, ring.WR{Op: ring.OpWrite, Context: 5, Flags: uint64(fi.REMOTE_CQ_DATA), Data: 0xfeed}, 4096, local, remote)
			if c := g.completion(t, 5); c.Err != 0 || c.Len != 34 {
				t.Fatalf("write completion %+v", c)
			}
			c := g.completion(t, 0)
			var got []byte
			for _, r := range remote {
				got = append(got, g.mem[r.Addr:r.Addr+r.Len]...)
			}
			if c.Err != 0 || c.Data != 0xfeed || c.Flags&uint64(fi.REMOTE_CQ_DATA) == 0 || !bytes.Equal(got, want) {
				t.Fatalf("target entry %+v, remote segments %x; want the data 0xfeed and %x", c, got, want)
			}
			time.Sleep(50 * time.Millisecond)
			if head, tail := g.cq.Peek(); head != tail || len(g.cqes) != 0 {
				t.Errorf("%d more completions, %+v: want one entry at the target", tail-head, g.cqes)
			}
		})
	}
}
