package verbs

import (
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

// account is one user's Connections, as core.Fabric keeps them, with a
// limit.
type account struct {
	mu          sync.Mutex
	held, limit int64
}

func (a *account) Take(r core.Resource, n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r == core.Connections && a.held+n > a.limit {
		return core.Errorf(fi.ENOSPC, "uid 1000 holds %d of %s, the limit is %d", a.held, r, a.limit)
	}
	a.held += n
	return nil
}

func (a *account) Give(r core.Resource, n int64) {
	a.mu.Lock()
	a.held -= n
	a.mu.Unlock()
}

// wantHeld waits until a holds n (a QP is given back as it is destroyed).
func (a *account) wantHeld(t *testing.T, what string, n int64) {
	t.Helper()
	deadline := time.Now().Add(provtest.WaitTime)
	for {
		a.mu.Lock()
		got := a.held
		a.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the account holds %d connections, want %d", what, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// charged are the events of an endpoint charged to an account.
type charged struct {
	*provtest.EPEvents
	*account
}

// An RC queue pair is charged to its endpoint's owner as a connection,
// both the connecting endpoint's and the one that accepts a request, from
// Enable until Close; past the owner's limit Enable fails with ENOSPC and
// makes no QP. An endpoint made from a request and only rejected is not
// charged.
func TestQueuePairsAreCharged(t *testing.T) {
	p, da, db := twoDevices(t, nil)
	_, pev, addr := listen(t, p, db)
	info := infoOf(t, p, da.name, fi.EP_MSG)
	ca, cb := &account{limit: 1}, &account{limit: 1}

	cliEv := provtest.NewEPEvents()
	cli, err := da.NewEndpoint(info, nil, charged{cliEv, ca})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := cli.Enable(); err != nil {
		t.Fatal(err)
	}
	ca.wantHeld(t, "an enabled endpoint", 1)
	over, err := da.NewEndpoint(info, nil, charged{provtest.NewEPEvents(), ca})
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	if err := over.Enable(); core.Code(err) != fi.ENOSPC {
		t.Fatalf("enable past the limit: %v, want ENOSPC", err)
	}
	ca.wantHeld(t, "after the refused enable", 1)

	if err := cli.Connect(addr, nil); err != nil {
		t.Fatal(err)
	}
	req := pev.WaitReq(t)
	srvEv := provtest.NewEPEvents()
	srv, err := db.NewEndpoint(req.Info(), req, charged{srvEv, cb})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cb.wantHeld(t, "an endpoint made from a request, before enable", 0)
	if err := srv.Enable(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Accept(nil); err != nil {
		t.Fatal(err)
	}
	cliEv.WaitConnected(t)
	srvEv.WaitConnected(t)
	cb.wantHeld(t, "the accepting endpoint", 1)

	cli.Close()
	ca.wantHeld(t, "after the client's close", 0)
	if err := over.Enable(); err != nil {
		t.Fatalf("enable after a QP was given back: %v", err)
	}
	ca.wantHeld(t, "the second endpoint", 1)
	srv.Close()
	cb.wantHeld(t, "after the server's close", 0)

	// a request only rejected costs its listener's owner nothing
	rej := newSide(t, da, info, nil)
	if err := rej.ep.Connect(addr, nil); err != nil {
		t.Fatal(err)
	}
	req = pev.WaitReq(t)
	r, err := db.NewEndpoint(req.Info(), req, charged{provtest.NewEPEvents(), cb})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reject(nil); err != nil {
		t.Fatal(err)
	}
	r.Close()
	cb.wantHeld(t, "a rejected request", 0)
}
