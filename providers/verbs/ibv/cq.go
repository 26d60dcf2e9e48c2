package ibv

import (
	"slices"
	"sync"
	"syscall"
)

// CQ is a completion queue (ibv_create_cq): a ring of work completions
// that the device's goroutines and posters fill and Poll empties.
type CQ struct {
	dev    *Device
	notify func()

	mu      sync.Mutex
	ring    []WC
	head, n int   // the oldest entry and the number of entries
	overrun bool  // an entry did not fit: the CQ is in error
	qps     []*QP // the QPs that complete on it
	dead    bool
}

// CreateCQ creates a CQ of at least cqe entries. notify, if not nil, is
// called (from any goroutine, with no device lock held, never blocking)
// after entries were added that Poll has not returned yet: the Go
// equivalent of a completion channel armed after every event. An overrun
// CQ moves its QPs to the error state, as an IBV_EVENT_CQ_ERR would.
func (d *Device) CreateCQ(cqe int, notify func()) (*CQ, error) {
	if cqe < 1 || cqe > deviceAttr.MaxCQE {
		return nil, errorf(syscall.EINVAL, "create cq: %d entries, want 1 to %d", cqe, deviceAttr.MaxCQE)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return nil, errorf(syscall.EINVAL, "create cq: device %s is closed", d.name)
	case d.nobj.cq >= deviceAttr.MaxCQ:
		return nil, errorf(syscall.ENOMEM, "create cq: %d CQs already", d.nobj.cq)
	}
	d.nobj.cq++
	return &CQ{dev: d, notify: notify, ring: make([]WC, cqe)}, nil
}

// Poll moves up to len(wc) completions into wc, oldest first, and returns
// how many (ibv_poll_cq).
func (cq *CQ) Poll(wc []WC) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	k := 0
	for k < len(wc) && cq.n > 0 {
		wc[k] = cq.ring[cq.head]
		cq.head++
		if cq.head == len(cq.ring) {
			cq.head = 0
		}
		cq.n--
		k++
	}
	return k
}

// Destroy destroys the CQ; EBUSY while a QP uses it.
func (cq *CQ) Destroy() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	switch {
	case cq.dead:
		return errorf(syscall.EINVAL, "destroy cq: destroyed already")
	case len(cq.qps) > 0:
		return errorf(syscall.EBUSY, "destroy cq: %d QPs use it", len(cq.qps))
	}
	cq.dead = true
	cq.ring, cq.head, cq.n = nil, 0, 0 // what still refers to the CQ holds no ring
	cq.dev.mu.Lock()
	cq.dev.nobj.cq--
	cq.dev.mu.Unlock()
	return nil
}

// push adds wc, or, if the CQ is full, puts the CQ in error and starts
// moving its QPs to the error state. The caller holds its QP's lock and
// calls signal after releasing it.
func (cq *CQ) push(wc *WC) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.overrun || cq.dead {
		return
	}
	if cq.n == len(cq.ring) {
		cq.overrun = true
		qps := append([]*QP(nil), cq.qps...)
		go func() {
			for _, qp := range qps {
				qp.setError()
			}
		}()
		return
	}
	i := cq.head + cq.n
	if i >= len(cq.ring) {
		i -= len(cq.ring)
	}
	cq.ring[i] = *wc
	cq.n++
}

// signal calls the notify callback.
func (cq *CQ) signal() {
	if cq.notify != nil {
		cq.notify()
	}
}

// bind records that qp completes on the CQ.
func (cq *CQ) bind(qp *QP) error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.dead {
		return errorf(syscall.EINVAL, "create qp: CQ destroyed")
	}
	for _, q := range cq.qps {
		if q == qp {
			return nil
		}
	}
	cq.qps = append(cq.qps, qp)
	return nil
}

// unbind forgets qp.
func (cq *CQ) unbind(qp *QP) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.qps = slices.DeleteFunc(cq.qps, func(q *QP) bool { return q == qp }) // clears the freed slot
}
