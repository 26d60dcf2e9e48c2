package tcp

// ring is a FIFO of bounded capacity. Its room is made at the first push
// and grows with use, doubling up to the capacity, and is kept: an
// endpoint that never queues anything costs nothing here (a daemon holds
// thousands), an idle connection little, and a busy one stops allocating
// once its queues have grown to their use.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest element
	n    int
	max  int // the capacity
}

// ringStart is the room a ring gets at its first push.
const ringStart = 8

func newRing[T any](capacity int) ring[T] { return ring[T]{max: capacity} }

func (r *ring[T]) len() int   { return r.n }
func (r *ring[T]) full() bool { return r.n == r.max }

// push appends v; the caller checks full first.
func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

// grow doubles the room (none: ringStart), up to the capacity, keeping
// the order.
func (r *ring[T]) grow() {
	buf := make([]T, min(max(2*len(r.buf), ringStart), r.max))
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

// pop removes the oldest element.
func (r *ring[T]) pop() (T, bool) {
	var zero T
	if r.n == 0 {
		return zero, false
	}
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v, true
}

// remove deletes the first element for which match is true, keeping the
// order of the others.
func (r *ring[T]) remove(match func(T) bool) (T, bool) {
	var zero T
	for i := 0; i < r.n; i++ {
		j := (r.head + i) % len(r.buf)
		if !match(r.buf[j]) {
			continue
		}
		v := r.buf[j]
		for ; i < r.n-1; i++ {
			next := (r.head + i + 1) % len(r.buf)
			r.buf[(r.head+i)%len(r.buf)] = r.buf[next]
		}
		r.buf[(r.head+r.n-1)%len(r.buf)] = zero
		r.n--
		return v, true
	}
	return zero, false
}

// drain removes every element, oldest first, appending them to dst.
func (r *ring[T]) drain(dst []T) []T {
	for {
		v, ok := r.pop()
		if !ok {
			return dst
		}
		dst = append(dst, v)
	}
}
