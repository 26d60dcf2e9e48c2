package core_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// flushProvider is the tcp provider whose endpoints record the flags of
// the operations posted to them and, with log.flusher, count the engine's
// Flush calls (core.Flusher), passing both on; without it they are not
// Flushers.
type flushProvider struct {
	core.Provider
	log *flushLog
}

type flushLog struct {
	flusher bool
	mu      sync.Mutex
	more    map[core.OpKind][]bool // per kind, whether each post had fi.MORE
	flushes int
}

type flushDomain struct {
	core.ProviderDomain
	log *flushLog
}

type recordEP struct {
	core.Endpoint
	log *flushLog
}

type flushEP struct{ recordEP }

func (p flushProvider) OpenDomain(name string) (core.ProviderDomain, error) {
	d, err := p.Provider.OpenDomain(name)
	if err != nil {
		return nil, err
	}
	return flushDomain{d, p.log}, nil
}

func (d flushDomain) NewEndpoint(info *fi.Info, req core.ConnReq, ev core.EndpointEvents) (core.Endpoint, error) {
	e, err := d.ProviderDomain.NewEndpoint(info, req, ev)
	if err != nil {
		return nil, err
	}
	if d.log.flusher {
		return flushEP{recordEP{e, d.log}}, nil
	}
	return recordEP{e, d.log}, nil
}

func (e recordEP) Post(op *core.Op) error {
	e.log.mu.Lock()
	e.log.more[op.Kind] = append(e.log.more[op.Kind], op.Flags&fi.MORE != 0)
	e.log.mu.Unlock()
	return e.Endpoint.Post(op)
}

func (e flushEP) Flush() {
	e.log.mu.Lock()
	e.log.flushes++
	e.log.mu.Unlock()
	e.Endpoint.(core.Flusher).Flush()
}

// TestEnginePassFlushes: the engine posts every send of a pass over a tx
// ring with FI_MORE (fi_msg(3): "Indicates that the user has additional
// requests that will immediately be posted after the current call
// returns") and flushes the provider endpoint once after the pass; the
// receives carry no FI_MORE, and the messages arrive whole and in order.
// A request's own FI_MORE does not reach a provider that holds nothing.
func TestEnginePassFlushes(t *testing.T) {
	tp, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	log := &flushLog{flusher: true, more: map[core.OpKind][]bool{}}
	sa, sb, mem, cqr := ringPair(t, loOf(t, flushProvider{tp, log}))
	const n = 8
	for i := range n {
		sa.post(t, sa.rx, ring.WR{Op: ring.OpRecv, Context: uint64(100 + i), Offset: uint64(64 * i), Len: 64})
	}
	if sb.tx.Free() < n {
		t.Fatalf("tx ring has room for %d requests, want %d", sb.tx.Free(), n)
	}
	_, tail := sb.tx.Peek()
	for i := range n {
		copy(mem[1024+512+16*i:], fmt.Sprintf("message %d", i))
		w := ring.WR{Op: ring.OpSend, Context: uint64(200 + i), Desc: sb.desc, Offset: sb.off + uint64(512+16*i), Len: 9}
		w.Encode(sb.tx.Entry(tail + uint32(i)))
	}
	sb.tx.Publish(n) // one pass takes all of them
	cqes := reapCQEs(t, cqr, nil, 2*n, "the sends and receives")
	var recvs []ring.CQE
	for _, c := range cqes {
		if c.Err != 0 {
			t.Fatalf("completion %+v has an error", c)
		}
		if c.Context < 200 {
			recvs = append(recvs, c)
		}
	}
	for i, c := range recvs {
		want := fmt.Sprintf("message %d", i)
		if c.Context != uint64(100+i) || c.Len != 9 || string(mem[64*i:64*i+9]) != want {
			t.Errorf("receive %d: completion %+v, buffer %q; want context %d with %q", i, c, mem[64*i:64*i+9], 100+i, want)
		}
	}
	log.mu.Lock()
	sends, rcvs, flushes := log.more[core.OpSend], log.more[core.OpRecv], log.flushes
	log.mu.Unlock()
	if len(sends) != n || len(rcvs) != n {
		t.Fatalf("posted %d sends and %d receives, want %d each", len(sends), len(rcvs), n)
	}
	for i, m := range sends {
		if !m {
			t.Errorf("send %d was posted without FI_MORE", i)
		}
	}
	for i, m := range rcvs {
		if m {
			t.Errorf("receive %d was posted with FI_MORE", i)
		}
	}
	if flushes != 1 {
		t.Errorf("%d flushes for one pass of %d sends, want 1", flushes, n)
	}
}

// TestRequestMoreNotPassedOn: a provider endpoint that holds nothing
// (not a core.Flusher) gets no FI_MORE, even from a request that has it,
// since nothing would flush what it held.
func TestRequestMoreNotPassedOn(t *testing.T) {
	tp, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	log := &flushLog{more: map[core.OpKind][]bool{}}
	sa, sb, mem, cqr := ringPair(t, loOf(t, flushProvider{tp, log}))
	sa.post(t, sa.rx, ring.WR{Op: ring.OpRecv, Context: 1, Len: 64})
	copy(mem[1024:], "more")
	sb.post(t, sb.tx, ring.WR{Op: ring.OpSend, Context: 2, Len: 4, Flags: uint64(fi.MORE)})
	reapCQEs(t, cqr, nil, 2, "the send and the receive")
	log.mu.Lock()
	defer log.mu.Unlock()
	if sends := log.more[core.OpSend]; len(sends) != 1 || sends[0] {
		t.Errorf("sends posted, with FI_MORE or not: %v; want one, without", sends)
	}
}
