package verbs

import (
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/internal/provtest"
)

// charged are the events of an endpoint charged to an account.
type charged struct {
	*provtest.EPEvents
	*provtest.Account
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
	ca, cb := provtest.NewAccount(1), provtest.NewAccount(1)

	cliEv := provtest.NewEPEvents()
	cli, err := da.NewEndpoint(info, nil, charged{cliEv, ca})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := cli.Enable(); err != nil {
		t.Fatal(err)
	}
	ca.WaitHeld(t, "an enabled endpoint", 1)
	over, err := da.NewEndpoint(info, nil, charged{provtest.NewEPEvents(), ca})
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	if err := over.Enable(); core.Code(err) != fi.ENOSPC {
		t.Fatalf("enable past the limit: %v, want ENOSPC", err)
	}
	ca.WaitHeld(t, "after the refused enable", 1)

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
	cb.WaitHeld(t, "an endpoint made from a request, before enable", 0)
	if err := srv.Enable(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Accept(nil); err != nil {
		t.Fatal(err)
	}
	cliEv.WaitConnected(t)
	srvEv.WaitConnected(t)
	cb.WaitHeld(t, "the accepting endpoint", 1)

	cli.Close()
	ca.WaitHeld(t, "after the client's close", 0)
	if err := over.Enable(); err != nil {
		t.Fatalf("enable after a QP was given back: %v", err)
	}
	ca.WaitHeld(t, "the second endpoint", 1)
	srv.Close()
	cb.WaitHeld(t, "after the server's close", 0)

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
	cb.WaitHeld(t, "a rejected request", 0)
}
