package tests

import (
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
		if strings.Contains(st, " ops=2") {
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
