package core

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fabricfs/fabricfs/core/fi"
)

// A Resource is something of the daemon's that users share and that each
// user may hold only so much of. Core charges objects and shared memory
// when it makes them; providers charge the connections they open for an
// endpoint to its owner through Take and Give.
type Resource int

const (
	// Objects are the directories of the tree a user made (mkdir, clone).
	Objects Resource = iota
	// MemoryBytes are bytes of shared memory: memory regions and rings.
	MemoryBytes
	// Connections are what a provider holds for a user's endpoints to
	// reach peers: listeners, connections made, and connections accepted
	// from when the user's endpoint takes the request (what peers open
	// before that is bounded per listener, charged to nobody); a socket
	// each for tcp, a queue pair each for verbs.
	Connections
	NumResources
)

var resourceNames = [NumResources]string{"objects", "memory_bytes", "connections"}

func (r Resource) String() string {
	if r < 0 || r >= NumResources {
		return fmt.Sprintf("resource(%d)", int(r))
	}
	return resourceNames[r]
}

// DefaultLimits are the limits of every uid other than root. The memory
// limit, 2 GiB, lets a user register a region of a gigabyte and still have
// the rings of its endpoints and queues, while a few users cannot pin the
// host's memory (the daemon's shared memory is not swapped out while
// mapped and stays until closed).
var DefaultLimits = Limits{
	Objects:     4096,
	MemoryBytes: 2 << 30,
	Connections: 4096,
}

// Limits holds one limit per resource; 0 means no limit.
type Limits [NumResources]int64

// Holding is what one uid holds of each resource.
type Holding [NumResources]int64

// accounts counts what each uid holds. Root (uid 0) is counted but never
// limited: the daemon's own user can always make what it needs.
type accounts struct {
	limits Limits
	held   map[uint32]*Holding
}

// take charges n of r to uid, or fails with FI_ENOSPC, the sentence
// naming the user, the resource and the limit, charging nothing.
func (a *accounts) take(uid uint32, r Resource, n int64) error {
	if a.held == nil { // a Fabric made without New (core's own tests)
		a.held = map[uint32]*Holding{}
	}
	u := a.held[uid]
	if u == nil {
		u = new(Holding)
		a.held[uid] = u
	}
	if lim := a.limits[r]; uid != 0 && lim > 0 && u[r]+n > lim {
		return Errorf(fi.ENOSPC, "uid %d holds %d of %s, the limit is %d", uid, u[r], r, lim)
	}
	u[r] += n
	return nil
}

// give returns n of r that uid held.
func (a *accounts) give(uid uint32, r Resource, n int64) {
	u := a.held[uid]
	if u == nil {
		return
	}
	u[r] -= n
	if *u == (Holding{}) {
		delete(a.held, uid)
	}
}

// Take charges n of r to uid: the daemon is about to hold it for that
// user. It fails with FI_ENOSPC when uid (other than root) would go over
// its limit, and while the daemon shuts down. Every successful Take is
// matched by a Give of the same amount.
func (f *Fabric) Take(uid uint32, r Resource, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return Errorf(fi.ESHUTDOWN, "fabricfs is shutting down")
	}
	return f.acct.take(uid, r, n)
}

// Give returns n of r that uid held (a Take's amount).
func (f *Fabric) Give(uid uint32, r Resource, n int64) {
	f.mu.Lock()
	f.acct.give(uid, r, n)
	f.mu.Unlock()
}

// SetLimit sets the limit of r for every uid other than root; 0 removes
// it. What a user holds already stays held.
func (f *Fabric) SetLimit(r Resource, n int64) {
	f.mu.Lock()
	f.acct.limits[r] = n
	f.mu.Unlock()
}

// Limits returns the limits in force.
func (f *Fabric) Limits() Limits {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acct.limits
}

// Held returns what uid holds.
func (f *Fabric) Held(uid uint32) Holding {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.acct.held[uid]; u != nil {
		return *u
	}
	return Holding{}
}

// Users lists the uids that hold anything, in increasing order.
func (f *Fabric) Users() []uint32 {
	f.mu.Lock()
	uids := make([]uint32, 0, len(f.acct.held))
	for uid := range f.acct.held {
		uids = append(uids, uid)
	}
	f.mu.Unlock()
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	return uids
}

// Use is what a user holds of one resource and its limit (0: none), as
// limits.json shows it.
type Use struct {
	Held  int64 `json:"held"`
	Limit int64 `json:"limit"`
}

// Uses is what uid holds of each resource against the limits, by the
// resource's name.
func (f *Fabric) Uses(uid uint32) map[string]Use {
	lim, use := f.Limits(), f.Held(uid)
	if uid == 0 {
		lim = Limits{}
	}
	out := make(map[string]Use, NumResources)
	for r := Resource(0); r < NumResources; r++ {
		out[r.String()] = Use{Held: use[r], Limit: lim[r]}
	}
	return out
}

// LimitsText renders Uses, one resource a line in Resource order:
// "objects 12 4096" (name, held, limit; 0 is no limit).
func (f *Fabric) LimitsText(uid uint32) string {
	uses := f.Uses(uid)
	var b strings.Builder
	for r := Resource(0); r < NumResources; r++ {
		u := uses[r.String()]
		fmt.Fprintf(&b, "%s %d %d\n", r, u.Held, u.Limit)
	}
	return b.String()
}

// Accounter is implemented by the EndpointEvents and PassiveEvents core
// gives providers: it charges what the provider holds for the endpoint
// (Connections) to the endpoint's owner. A provider layered over another
// passes it on to the events it gives the provider below.
type Accounter interface {
	Take(r Resource, n int64) error
	Give(r Resource, n int64)
}

// Take charges n of r to the owner of the endpoint ev stands for, if ev
// is an Accounter; otherwise (a provider's own tests) it charges nothing.
func Take(ev any, r Resource, n int64) error {
	if a, ok := ev.(Accounter); ok {
		return a.Take(r, n)
	}
	return nil
}

// Give returns what Take charged through ev.
func Give(ev any, r Resource, n int64) {
	if a, ok := ev.(Accounter); ok {
		a.Give(r, n)
	}
}

// take and give charge the object's owner.
func (o *Object) take(r Resource, n int64) error { return o.Dom.fab.Take(o.Owner, r, n) }
func (o *Object) give(r Resource, n int64)       { o.Dom.fab.Give(o.Owner, r, n) }

func (ev epEvents) Take(r Resource, n int64) error  { return ev.e.obj.take(r, n) }
func (ev epEvents) Give(r Resource, n int64)        { ev.e.obj.give(r, n) }
func (ev pepEvents) Take(r Resource, n int64) error { return ev.p.obj.take(r, n) }
func (ev pepEvents) Give(r Resource, n int64)       { ev.p.obj.give(r, n) }

var (
	_ Accounter = epEvents{}
	_ Accounter = pepEvents{}
)
