package tests

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
)

// TestCancelOne checks fi_cancel's rules through the ctl verb on a
// connected tcp pair: "If multiple outstanding operations match the
// context parameter, only one will be canceled", and cancelling an
// operation that is not pending is no error ("if the operation completed
// before the call to fi_cancel, then the completion status of that
// operation will be available in the associated completion queue").
func TestCancelOne(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
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
	mr, err := dom.NewMR(4096, "FI_SEND,FI_RECV")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()

	const ctx = 7
	for i := uint64(0); i < 2; i++ {
		if err := b.PostRecv(mr, i*64, 64, ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		st := d.read(t, "tcp", "lo", "ep", b.ID(), "status")
		if strings.Contains(st, " ops=2 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two receives are not posted: %s", st)
		}
	}
	if err := b.Ctl("cancel 7"); err != nil {
		t.Fatalf("cancel 7: %v (%s)", err, b.Err())
	}
	if err := cqB.Wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a second cancellation would be there by now
	es := cqB.Poll(16)
	if len(es) != 1 || es[0].Err != -int32(fi.ECANCELED) || es[0].Context != ctx {
		t.Fatalf("after one cancel of two receives with context 7: %+v, want one FI_ECANCELED", es)
	}
	// The other receive is still posted and takes a message.
	copy(mr.Mem()[1024:], "hello")
	if err := a.PostSend(mr, 1024, 5, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := cqB.Wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if es := cqB.Poll(16); len(es) != 1 || es[0].Err != 0 || es[0].Context != ctx || es[0].Len != 5 {
		t.Fatalf("the receive left: %+v", es)
	}
	// Nothing pending with these contexts: no error.
	for _, c := range []string{"cancel 7", "cancel 0x1234"} {
		if err := b.Ctl(c); err != nil {
			t.Errorf("%s with nothing pending: %v, want success", c, err)
		}
	}
	if es := cqB.Poll(16); len(es) != 0 {
		t.Errorf("cancelling nothing made completions: %+v", es)
	}
}

// TestCloseDiscards: "Outstanding operations posted to the endpoint when
// fi_close is called will be discarded. Discarded operations will silently
// be dropped, with no completions reported" — on a CQ the closed endpoint
// shared with another, nothing appears; with attr/cancel_on_close true,
// the receives complete with FI_ECANCELED instead.
func TestCloseDiscards(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("tcp", "lo")
	eq, err := dom.NewEQ()
	if err != nil {
		t.Fatal(err)
	}
	defer eq.Close()
	cq, err := dom.NewCQ(16) // shared by both endpoints
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	mr, err := dom.NewMR(4096, "FI_SEND,FI_RECV")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	for _, cancel := range []bool{false, true} {
		a, _, pep, err := dom.Connect(eq, cq, cq)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.SetAttr("cancel_on_close", strconv.FormatBool(cancel)); err != nil {
			t.Fatalf("cancel_on_close %v: %v (%s)", cancel, err, a.Err())
		}
		for i := uint64(0); i < 3; i++ {
			if err := a.PostRecv(mr, i*64, 64, 100+i, 0); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.read(t, "tcp", "lo", "ep", a.ID(), "status"), " ops=3 "); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the receives are not posted")
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		es := cq.Poll(16)
		pep.Close()
		if !cancel {
			if len(es) != 0 {
				t.Errorf("closing with three receives posted made completions: %+v", es)
			}
			continue
		}
		if len(es) != 3 {
			t.Fatalf("cancel_on_close true: %d completions, want 3 FI_ECANCELED: %+v", len(es), es)
		}
		for _, e := range es {
			if e.Err != -int32(fi.ECANCELED) || e.Context < 100 || e.Context > 102 {
				t.Errorf("cancel_on_close true: %+v, want FI_ECANCELED of a receive", e)
			}
		}
	}
}
