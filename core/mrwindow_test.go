package core_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// TestMRWindow: a region made of windows (`window MRID OFFSET LEN`) onto
// other regions' memory has their bytes, shared both ways, with its own
// key and access: a peer's write through its key lands in the source's
// memory. It allocates nothing (the user's memory is counted once), the
// memory it reaches stays after the source region closes, and goes back
// to the user's limit when the window closes.
func TestMRWindow(t *testing.T) {
	page := os.Getpagesize()
	ctx := context.Background()
	f, d := loFabric(t)
	a, _, _, _, _ := pair(t, d, "bind cq c send,recv")
	memory := func() int64 { return f.Held(0)[core.MemoryBytes] }

	x := create(t, d, core.KindMR, "x") // the peer's source of writes
	setAttrs(t, x, map[string]string{"len": fmt.Sprint(page)})
	run(t, x, "reg")
	s := create(t, d, core.KindMR, "s")
	setAttrs(t, s, map[string]string{"len": fmt.Sprint(3 * page)})
	run(t, s, "reg")
	sr, err := s.Impl.(*core.MR).Region()
	if err != nil {
		t.Fatal(err)
	}
	for i := range sr.Mem {
		sr.Mem[i] = byte(i % 251)
	}
	before := memory()

	// w: s's pages 1 and 2, then page 0, peers reaching it from byte 10.
	w := create(t, d, core.KindMR, "w")
	setAttrs(t, w, map[string]string{"len": fmt.Sprint(3 * page), "base": "10", "access": "FI_REMOTE_WRITE,FI_REMOTE_READ"})
	run(t, w, fmt.Sprintf("window s %d %d", page, 2*page))
	run(t, w, fmt.Sprintf("window s 0 %d", page))
	run(t, w, "reg")
	if got := memory(); got != before {
		t.Errorf("registering a window took %d bytes of memory, want none", got-before)
	}
	wm := w.Impl.(*core.MR)
	_, err = wm.Region()
	wantCode(t, "a window's data", err, fi.EOPNOTSUPP)
	if wm.Key() == s.Impl.(*core.MR).Key() {
		t.Error("the window has its source's key")
	}

	// A peer's write at address 20 through w's key is byte 10+20 of w:
	// byte page+30 of s.
	write := func(what string, wantAt int) {
		t.Helper()
		xr, err := x.Impl.(*core.MR).Region()
		if err != nil {
			t.Fatal(err)
		}
		copy(xr.Mem, what)
		if err := a.Ctl(ctx, 0, fmt.Sprintf("write x 0 %d 20 %#x", len(what), wm.Key())); err != nil {
			t.Fatalf("write through the window's key: %v", err)
		}
		for deadline := time.Now().Add(5 * time.Second); string(sr.Mem[wantAt:wantAt+len(what)]) != what; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("a write at address 20 of the window left bytes [%d, +%d) of its source as %q", wantAt, len(what), sr.Mem[wantAt:wantAt+len(what)])
			}
		}
	}
	write("through!", page+30)
	// The source's bytes are the window's: the peer reads them through
	// w, the window's third page being s's first.
	copy(sr.Mem[5:], "page0!!!")
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 100 8 %#x %#x", 2*page-10+5, wm.Key())); err != nil {
		t.Fatal(err)
	}
	xr, _ := x.Impl.(*core.MR).Region()
	if string(xr.Mem[100:108]) != "page0!!!" {
		t.Errorf("a read through the window at its third page gave %q, want s's page 0", xr.Mem[100:108])
	}

	// s closes: its key goes, its memory stays for w.
	key := s.Impl.(*core.MR).Key()
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := memory(); got != before {
		t.Errorf("after the source closed the user holds %d bytes, want %d (the window uses them)", got, before)
	}
	write("after!!!", page+30)

	// A window onto the window reaches the same memory, and outlives it.
	v := create(t, d, core.KindMR, "v")
	setAttrs(t, v, map[string]string{"len": fmt.Sprint(page), "access": "FI_REMOTE_READ"})
	run(t, v, "window w 0 "+fmt.Sprint(page))
	run(t, v, "reg")
	if err := w.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := memory(); got != before {
		t.Errorf("with a window of a window left the user holds %d bytes, want %d", got, before)
	}
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 200 8 30 %#x", v.Impl.(*core.MR).Key())); err != nil || string(xr.Mem[200:208]) != "after!!!" {
		t.Errorf("read through a window of a window: %v, %q", err, xr.Mem[200:208])
	}
	if err := v.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := memory(); got != before-int64(3*page) {
		t.Errorf("after the last window closed the user holds %d bytes, want %d", got, before-int64(3*page))
	}
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 0 8 0 %#x", key)); err == nil {
		t.Error("a read through the closed source's key succeeded")
	}
}

// TestMRWindowErrors: windows are whole pages of a registered region of
// the same user, asked before reg, adding up to attr/len, and a region
// has at most core.MaxMRPieces pieces of memory.
func TestMRWindowErrors(t *testing.T) {
	page := os.Getpagesize()
	ctx := context.Background()
	f, d := loFabric(t)
	s := create(t, d, core.KindMR, "s")
	setAttrs(t, s, map[string]string{"len": fmt.Sprint(2 * page)})
	u := create(t, d, core.KindMR, "u") // not registered
	setAttrs(t, u, map[string]string{"len": fmt.Sprint(page)})
	w := create(t, d, core.KindMR, "w")
	setAttrs(t, w, map[string]string{"len": fmt.Sprint(page)})
	wantCode(t, "a window onto an unregistered region", w.Ctl(ctx, 0, "window s 0 4096"), fi.EINVAL)
	run(t, s, "reg")
	for _, c := range []string{"window s 1 4096", "window s 0 100", "window s 0 0", fmt.Sprintf("window s %d %d", page, 2*page),
		"window u 0 4096", "window w 0 4096"} {
		wantCode(t, c, w.Ctl(ctx, 0, c), fi.EINVAL)
	}
	wantCode(t, "a window onto no region", w.Ctl(ctx, 0, "window 99 0 4096"), fi.ENOENT)
	other, err := d.Create(core.KindMR, "other", 1000)
	if err != nil {
		t.Fatal(err)
	}
	setAttrs(t, other, map[string]string{"len": fmt.Sprint(page)})
	if err := other.Ctl(ctx, 1000, "reg"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a window onto another user's region", w.Impl.(*core.MR).Window(other, 0, uint64(page)), fi.EACCES)

	// Length: the windows must hold attr/len bytes.
	run(t, w, fmt.Sprintf("window s 0 %d", page))
	run(t, w, fmt.Sprintf("window s %d %d", page, page)) // joins the first
	wantCode(t, "reg with windows of 2 pages and len 1", w.Ctl(ctx, 0, "reg"), fi.EINVAL)
	setAttrs(t, w, map[string]string{"len": fmt.Sprint(2 * page)})
	run(t, w, "reg")
	wantCode(t, "a window after reg", w.Ctl(ctx, 0, "window s 0 4096"), fi.EBUSY)

	// Pieces: alternating pages of two regions join nowhere.
	held := f.Held(0)[core.MemoryBytes]
	t2 := create(t, d, core.KindMR, "t")
	setAttrs(t, t2, map[string]string{"len": fmt.Sprint(page)})
	run(t, t2, "reg")
	many := create(t, d, core.KindMR, "many")
	for i := 0; i < core.MaxMRPieces; i++ {
		src := []string{"s", "t"}[i%2]
		run(t, many, fmt.Sprintf("window %s 0 %d", src, page))
	}
	wantCode(t, "one piece too many", many.Ctl(ctx, 0, fmt.Sprintf("window s %d %d", page, page)), fi.EINVAL)
	setAttrs(t, many, map[string]string{"len": fmt.Sprint(core.MaxMRPieces * page)})
	run(t, many, "reg")
	mr, _ := many.Impl.(*core.MR).Region()
	if mr != nil {
		t.Error("a region of windows gives a data region")
	}
	// Everything closed: every byte back.
	for _, o := range []*core.Object{many, w, s, t2, u} {
		if err := o.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Held(0)[core.MemoryBytes]; got != held-int64(2*page) {
		t.Errorf("after closing every region the user holds %d bytes of memory, want %d", got, held-int64(2*page))
	}
}
