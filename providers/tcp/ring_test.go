package tcp

import "testing"

// A ring has no room until its first push, then grows with use, up to
// its capacity, keeping its order across the wrap.
func TestRingGrows(t *testing.T) {
	r := newRing[int](20)
	if _, ok := r.pop(); ok || r.len() != 0 || len(r.buf) != 0 {
		t.Fatalf("a new ring pops %v, holds %d, has room for %d; want nothing and no room", ok, r.len(), len(r.buf))
	}
	if _, ok := r.remove(func(int) bool { return true }); ok {
		t.Fatal("an empty ring removed an element")
	}
	r.push(-1)
	if len(r.buf) != ringStart {
		t.Fatalf("after the first push a ring has room for %d, want %d", len(r.buf), ringStart)
	}
	r.pop()
	next, want := 0, 0
	for range ringStart { // fill the first room, then wrap and grow
		r.push(next)
		next++
	}
	for range 3 {
		r.pop()
		want++
	}
	for round := range 5 {
		for !r.full() {
			r.push(next)
			next++
		}
		if r.len() != 20 || len(r.buf) != 20 {
			t.Fatalf("round %d: %d elements in room for %d, want 20 in 20", round, r.len(), len(r.buf))
		}
		for range 7 + round {
			v, _ := r.pop()
			if v != want {
				t.Fatalf("popped %d, want %d", v, want)
			}
			want++
		}
	}
	for _, v := range r.drain(nil) {
		if v != want {
			t.Fatalf("drained %d, want %d", v, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("got %d elements back of %d", want, next)
	}
}
