package ibv

import (
	"sync"
	"syscall"
)

// A recvWQE is a posted receive: its ID and its SGEs, copied at post.
type recvWQE struct {
	wrid uint64
	sges []SGE // room for the queue's maxSGE, made at the slot's first push
}

// A recvQueue is a ring of receives: a QP's receive queue or an SRQ. A
// slot's SGE array is made at its first push and kept, so posting and
// consuming do not allocate once the slots in use have theirs, and slots
// never used cost no page.
type recvQueue struct {
	slots   []recvWQE
	head, n int
	maxSGE  int
}

func newRecvQueue(maxWR, maxSGE int) recvQueue {
	return recvQueue{slots: make([]recvWQE, maxWR), maxSGE: maxSGE}
}

// check says why wr cannot be posted to the queue, if it cannot.
func (q *recvQueue) check(wr *RecvWR) error {
	switch {
	case wr == nil:
		return errorf(syscall.EINVAL, "post recv: no work request")
	case len(wr.SGList) > q.maxSGE:
		return errorf(syscall.EINVAL, "post recv: %d SGEs, at most %d", len(wr.SGList), q.maxSGE)
	case q.n == len(q.slots):
		return errorf(syscall.ENOMEM, "post recv: the receive queue holds %d requests already", q.n)
	}
	return nil
}

// push appends wr, which check accepted.
func (q *recvQueue) push(wr *RecvWR) {
	i := (q.head + q.n) % len(q.slots)
	s := &q.slots[i]
	s.wrid = wr.WRID
	if s.sges == nil {
		s.sges = make([]SGE, 0, q.maxSGE)
	}
	s.sges = append(s.sges[:0], wr.SGList...)
	q.n++
}

// pop removes the oldest receive and copies it into w, whose SGE slice
// has room for maxSGE entries. It reports false if the queue is empty.
func (q *recvQueue) pop(w *recvWQE) bool {
	if q.n == 0 {
		return false
	}
	s := &q.slots[q.head]
	w.wrid = s.wrid
	w.sges = append(w.sges[:0], s.sges...)
	q.head = (q.head + 1) % len(q.slots)
	q.n--
	return true
}

// peek returns the oldest receive, or nil.
func (q *recvQueue) peek() *recvWQE {
	if q.n == 0 {
		return nil
	}
	return &q.slots[q.head]
}

// clear empties the queue.
func (q *recvQueue) clear() { q.head, q.n = 0, 0 }

// SRQ is a shared receive queue (ibv_create_srq): receives that any QP
// created with it consumes, in the order they were posted.
type SRQ struct {
	pd *PD

	mu    sync.Mutex
	q     recvQueue
	users int // QPs using it
	dead  bool
}

// CreateSRQ creates an SRQ for maxWR receives of up to maxSGE entries.
func (pd *PD) CreateSRQ(maxWR, maxSGE int) (*SRQ, error) {
	switch {
	case maxWR < 1 || maxWR > deviceAttr.MaxSRQWR:
		return nil, errorf(syscall.EINVAL, "create srq: %d work requests, want 1 to %d", maxWR, deviceAttr.MaxSRQWR)
	case maxSGE < 0 || maxSGE > deviceAttr.MaxSGE:
		return nil, errorf(syscall.EINVAL, "create srq: %d SGEs, at most %d", maxSGE, deviceAttr.MaxSGE)
	}
	if err := pd.useCounted("create srq", func(c *objCounts) *int { return &c.srq }, deviceAttr.MaxSRQ, "SRQs"); err != nil {
		return nil, err
	}
	return &SRQ{pd: pd, q: newRecvQueue(maxWR, maxSGE)}, nil
}

// PostRecv posts a receive to the SRQ (ibv_post_srq_recv); ENOMEM when
// the SRQ is full.
func (s *SRQ) PostRecv(wr *RecvWR) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errorf(syscall.EINVAL, "post srq recv: SRQ destroyed")
	}
	if err := s.q.check(wr); err != nil {
		return err
	}
	s.q.push(wr)
	return nil
}

// Destroy destroys the SRQ; EBUSY while a QP uses it.
func (s *SRQ) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.dead:
		return errorf(syscall.EINVAL, "destroy srq: destroyed already")
	case s.users > 0:
		return errorf(syscall.EBUSY, "destroy srq: %d QPs use it", s.users)
	}
	s.dead = true
	d := s.pd.dev
	d.mu.Lock()
	d.nobj.srq--
	d.mu.Unlock()
	s.pd.release()
	return nil
}

// pop takes the oldest receive into w.
func (s *SRQ) pop(w *recvWQE) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.q.pop(w)
}

// use counts a QP using the SRQ.
func (s *SRQ) use() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errorf(syscall.EINVAL, "create qp: SRQ destroyed")
	}
	s.users++
	return nil
}

func (s *SRQ) release() {
	s.mu.Lock()
	s.users--
	s.mu.Unlock()
}
