package verbs

import (
	"bytes"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
	"github.com/fabricfs/fabricfs/providers/rxm"
)

// rdmPair makes an FI_EP_RDM endpoint (rxm over verbs) on each device.
func rdmPair(t *testing.T) (a, b side, nameA, nameB fi.Addr, da, db core.ProviderDomain) {
	return rdmPairOf(t, testProvider(t, nil, "127.0.0.1", "127.0.0.2"))
}

// rdmPairOf is rdmPair on the devices of p (127.0.0.1 and 127.0.0.2).
func rdmPairOf(t *testing.T, p *Provider) (a, b side, nameA, nameB fi.Addr, da, db core.ProviderDomain) {
	w := rxm.Wrap(p)
	da, a, nameA = rdmEndpoint(t, w, "rxe_127_0_0_1", 0)
	db, b, nameB = rdmEndpoint(t, w, "rxe_127_0_0_2", 0)
	return
}

// rdmEndpoint opens a domain of w named name and an enabled FI_EP_RDM
// endpoint of owner in it, both closed at the end of the test.
func rdmEndpoint(t *testing.T, w core.Provider, name string, owner uint32) (core.ProviderDomain, side, fi.Addr) {
	d, err := w.OpenDomain(name)
	if err != nil {
		t.Fatal(err)
	}
	var info *fi.Info
	for _, in := range w.Infos() {
		if in.DomainAttr.Name == name && in.EPAttr.Type == fi.EP_RDM {
			info = in.Clone()
			info.Mode &^= fi.BUFFERED_RECV // receives into the application's buffers
		}
	}
	s := side{ev: provtest.NewEPEvents(), done: make(chan done, 1<<10)}
	s.ev.OwnerUID = owner
	if s.ep, err = d.NewEndpoint(info, nil, s.ev); err != nil {
		t.Fatal(err)
	}
	if err := s.ep.Enable(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.ep.Close()
		d.Close()
	})
	n, _ := s.ep.Name()
	return d, s, n
}

// TestRDMInfo: the FI_EP_RDM entries over verbs are "verbs;ofi_rxm" with
// verbs's memory registration and CQ data attributes, rxm's eager size as
// inject_size (FI_MR_LOCAL), and FI_RMA_EVENT, which verbs's FI_EP_MSG
// entry has.
func TestRDMInfo(t *testing.T) {
	p := testProvider(t, nil, "127.0.0.1")
	var n int
	for _, in := range rxm.Wrap(p).Infos() {
		if in.EPAttr.Type != fi.EP_RDM {
			continue
		}
		n++
		d := in.DomainAttr
		if in.FabricAttr.ProvName != "verbs;ofi_rxm" || d.Name != "rxe_127_0_0_1" || d.MRMode&fi.MR_LOCAL == 0 || d.MRKeySize != 4 ||
			d.CQDataSize != 4 || in.TxAttr.InjectSize != rxm.EagerLimit || in.Caps&fi.RMA_EVENT == 0 || in.EPAttr.MaxMsgSize != MaxMsgSize ||
			in.RxAttr.Mode&fi.RX_CQ_DATA != 0 {
			t.Errorf("RDM entry: prov_name %q domain %s mr_mode %v key size %d cq_data_size %d inject %d caps %v max_msg %d rx mode %v",
				in.FabricAttr.ProvName, d.Name, d.MRMode, d.MRKeySize, d.CQDataSize, in.TxAttr.InjectSize, in.Caps, in.EPAttr.MaxMsgSize, in.RxAttr.Mode)
		}
	}
	if n != 1 {
		t.Errorf("%d FI_EP_RDM entries, want 1", n)
	}
}

// TestRDM: rxm over verbs carries eager messages, rendezvous messages
// (read by the receiver from a registration of the send buffer), RMA with
// the keys of memory registered through the RDM domain (a write reported
// to the target's events), and remote CQ data of writes, which take one
// of rxm's receive buffers.
func TestRDM(t *testing.T) {
	a, b, nameA, nameB, _, db := rdmPair(t)
	for i, n := range []int{10, rxm.EagerLimit, rxm.EagerLimit + 1, 300000} {
		msg := pattern(n, i)
		b.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, n)})
		a.post(t, &core.Op{Kind: core.OpSend, Buf: msg, Peer: nameB})
		if d := a.wait(t); d.c.Err != 0 || d.c.Len != uint64(n) {
			t.Fatalf("%d bytes: send %+v", n, d.c)
		}
		if d := b.wait(t); d.c.Err != 0 || !bytes.Equal(d.op.Buf[:d.c.Len], msg) {
			t.Fatalf("%d bytes: receive %+v", n, d.c)
		}
	}
	// b answers over the same connection.
	a.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	b.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("back"), Peer: nameA})
	b.wait(t)
	if d := a.wait(t); string(d.op.Buf[:d.c.Len]) != "back" {
		t.Errorf("a received %q", d.op.Buf[:d.c.Len])
	}

	reg, ok := db.(core.MemoryRegistrar)
	if !ok {
		t.Fatal("the RDM domain over verbs does not register memory")
	}
	target := sharedMem(t, 1<<16)
	m, err := reg.RegisterMemory(0, target, 0, fi.REMOTE_READ|fi.REMOTE_WRITE, uint64(fi.KEY_NOTAVAIL), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data := pattern(3000, 7)
	a.post(t, &core.Op{Kind: core.OpWrite, Buf: data, Addr: 10, Key: m.Key(), Peer: nameB})
	if d := a.wait(t); d.c.Err != 0 || d.c.Flags != fi.CQFlags(fi.RMA|fi.WRITE) {
		t.Fatalf("write: %+v", d.c)
	}
	if !bytes.Equal(target[10:3010], data) {
		t.Error("the target does not hold the written bytes")
	}
	select {
	case c := <-b.ev.RemoteCh:
		if c.Flags != fi.CQFlags(fi.RMA|fi.REMOTE_WRITE) || c.Len != 3000 {
			t.Errorf("remote write event %+v", c)
		}
	case <-time.After(waitTime):
		t.Fatal("no remote write event for the write")
	}
	got := make([]byte, 3000)
	a.post(t, &core.Op{Kind: core.OpRead, Buf: got, Addr: 10, Key: m.Key(), Peer: nameB})
	if d := a.wait(t); d.c.Err != 0 || !bytes.Equal(got, data) {
		t.Errorf("read: %+v", d.c)
	}
	// The application's remote read is reported (FI_RMA_EVENT), naming
	// the registration it read; rxm's own rendezvous reads are not.
	select {
	case c := <-b.ev.RemoteCh:
		if c.Flags != fi.CQFlags(fi.RMA|fi.REMOTE_READ) || c.Len != 3000 || c.Key != m.Key() {
			t.Errorf("remote read event %+v, want %d bytes of key %#x", c, 3000, m.Key())
		}
	case <-time.After(waitTime):
		t.Fatal("no remote read event for the read")
	}
	a.post(t, &core.Op{Kind: core.OpWrite, Buf: data[:100], Addr: 5000, Key: m.Key(), Peer: nameB,
		Flags: fi.OpFlags(fi.REMOTE_CQ_DATA), Data: 0x1234})
	a.wait(t)
	select {
	case c := <-b.ev.RemoteCh:
		if c.Flags&fi.CQFlags(fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA) != fi.CQFlags(fi.REMOTE_WRITE|fi.REMOTE_CQ_DATA) || c.Data != 0x1234 || c.Len != 100 {
			t.Errorf("remote write event %+v", c)
		}
	case <-time.After(waitTime):
		t.Fatal("no remote write event for writedata")
	}
	// The connection still carries messages: the buffer was reposted.
	b.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
	a.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("after"), Peer: nameB})
	if d := b.wait(t); string(d.op.Buf[:d.c.Len]) != "after" {
		t.Errorf("b received %q", d.op.Buf[:d.c.Len])
	}
}

// TestRDMKeyProbing: a peer's RDM endpoint that guesses memory keys loses
// its connection with each wrong key, and once it spent the burst of its
// bucket at the target's device (probe.go) its connection requests are
// refused but for one each probeRefill: in 2 s it presents probeBurst
// keys and 1 or 2 more (at 1 and 2 s), where a connection per guess would
// allow hundreds. Its other attempts fail with FI_ECONNREFUSED (or
// FI_ENOTCONN or FI_ECANCELED while a connection ends); the region is
// untouched.
func TestRDMKeyProbing(t *testing.T) {
	a, _, _, nameB, _, db := rdmPair(t)
	target := sharedMem(t, 4096)
	m, err := db.(core.MemoryRegistrar).RegisterMemory(0, target, 0, fi.REMOTE_READ|fi.REMOTE_WRITE, uint64(fi.KEY_NOTAVAIL), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	presented, refused := 0, 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		key := m.Key() ^ uint64(1+presented+refused)
		a.post(t, &core.Op{Kind: core.OpWrite, Buf: []byte("evil"), Key: key, Peer: nameB})
		switch d := a.wait(t); d.c.Err {
		case fi.EIO:
			presented++
		case fi.ECONNREFUSED, fi.ENOTCONN, fi.ECANCELED: // refused, or the last connection ending
			refused++
		default:
			t.Fatalf("write with key %#x: %+v", key, d.c)
		}
	}
	t.Logf("%d keys presented, %d attempts refused", presented, refused)
	if most := probeBurst + 3; presented < probeBurst || presented > most || refused == 0 {
		t.Errorf("%d keys presented and %d attempts refused in 2 s, want %d to %d presented and some refused", presented, refused, probeBurst, most)
	}
	if bytes.Contains(target, []byte("evil")) {
		t.Error("the region was written")
	}
}

// TestRDMDeadPeer: when the peer's device dies (its daemon is killed: it
// sends nothing more, not even a disconnect) during a 256 KiB rendezvous,
// every operation toward it ends with an error completion within
// deadPeerBound (docs/verbs.md, "Dead peers"): a send whose request the
// peer took but never read (the sender waits for a read-done), a receive
// whose rendezvous reads go to the dead peer, and an RMA write.
func TestRDMDeadPeer(t *testing.T) {
	const n = 256 << 10
	const bound = deadPeerBound
	for _, tc := range []string{"send waiting for read-done", "receive reading", "write"} {
		t.Run(tc, func(t *testing.T) {
			p := testProvider(t, nil, "127.0.0.1", "127.0.0.2")
			a, b, nameA, nameB, _, db := rdmPairOf(t, p)
			// A first message connects them.
			b.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, 8)})
			a.post(t, &core.Op{Kind: core.OpSend, Buf: []byte("hi"), Peer: nameB})
			a.wait(t)
			b.wait(t)
			kill := func() { p.devs[1].dev.Close() }
			var start time.Time
			switch tc {
			case "send waiting for read-done":
				a.post(t, &core.Op{Kind: core.OpSend, Buf: pattern(n, 1), Peer: nameB})
				time.Sleep(100 * time.Millisecond) // the request is at b, unexpected
				kill()
				start = time.Now()
			case "receive reading":
				b.post(t, &core.Op{Kind: core.OpSend, Buf: pattern(n, 2), Peer: nameA})
				time.Sleep(100 * time.Millisecond) // the request is at a, unexpected
				kill()
				start = time.Now()
				a.post(t, &core.Op{Kind: core.OpRecv, Buf: make([]byte, n)})
			case "write":
				m, err := db.(core.MemoryRegistrar).RegisterMemory(0, sharedMem(t, n), 0, fi.REMOTE_WRITE, uint64(fi.KEY_NOTAVAIL), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				kill()
				start = time.Now()
				a.post(t, &core.Op{Kind: core.OpWrite, Buf: pattern(n, 3), Key: m.Key(), Peer: nameB})
			}
			select {
			case d := <-a.done:
				if d.c.Err == 0 {
					t.Errorf("completion %+v, want an error", d.c)
				}
				t.Logf("%v after %v", d.c.Err, time.Since(start))
			case <-time.After(bound + time.Second):
				t.Fatalf("no completion %v after the peer died", bound+time.Second)
			}
		})
	}
}
