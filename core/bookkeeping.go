package core

import "sync"

// Bookkeeping that every provider's domain and passive endpoint needs.

// MaxPendingReqs bounds the connection requests a passive endpoint holds
// unanswered; more are rejected.
const MaxPendingReqs = 1024

// EPCount counts a domain's open endpoints and passive endpoints against
// its ep_cnt. The zero value counts none.
type EPCount struct {
	mu sync.Mutex
	n  int
}

// Hold counts one more, unless max are open already.
func (c *EPCount) Hold(max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= max {
		return false
	}
	c.n++
	return true
}

// Release counts one fewer.
func (c *EPCount) Release() {
	c.mu.Lock()
	c.n--
	c.mu.Unlock()
}

// Open is how many are open.
func (c *EPCount) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// PendingReqs are a passive endpoint's connection requests from their
// report (PassiveEvents.ConnReq) until an endpoint takes one (NewEndpoint
// with the request, to accept or reject it) or the passive endpoint
// closes. The zero value is empty and open.
type PendingReqs[R comparable] struct {
	mu     sync.Mutex
	closed bool
	m      map[R]struct{}
}

// Add holds r, unless MaxPendingReqs are held or Close was called: then
// the provider rejects the request.
func (p *PendingReqs[R]) Add(r R) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.m) >= MaxPendingReqs {
		return false
	}
	if p.m == nil {
		p.m = map[R]struct{}{}
	}
	p.m[r] = struct{}{}
	return true
}

// Take removes r and reports whether it was held: a request is taken once.
func (p *PendingReqs[R]) Take(r R) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.m[r]
	delete(p.m, r)
	return ok
}

// Close returns the requests nobody took, for the provider to reject;
// Add refuses from now on.
func (p *PendingReqs[R]) Close() []R {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	rs := make([]R, 0, len(p.m))
	for r := range p.m {
		rs = append(rs, r)
	}
	p.m = nil
	return rs
}
