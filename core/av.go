package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/fabricfs/fabricfs/core/fi"
)

// MaxAVEntries bounds an address vector.
const MaxAVEntries = 1 << 16

// AV is an address vector (fi_av_open): fi_addr_t -> address.
type AV struct {
	obj *Object

	mu      sync.Mutex
	typ     fi.AVType
	entries []*fi.Addr         // index = fi_addr; nil where removed
	byAddr  map[fi.Addr]uint64 // the first fi_addr of each address
	userIDs map[uint64]uint64  // fi_addr -> its user id (FI_AV_USER_ID, insert_id)
	count   int
	closed  bool // by Close: nothing is inserted again
	// rxCtxBits is fi_av_attr.rx_ctx_bits: the high bits of an fi_addr
	// that name a receive context of a scalable endpoint (fi_rx_addr).
	rxCtxBits int

	inserts, removes, lookups uint64 // stats
}

// MaxRxCtxBits bounds rx_ctx_bits: a receive context's index travels in
// one byte (rxm's rx_index), so a scalable endpoint has at most
// 1<<MaxRxCtxBits (ScalableCtxs) receive contexts.
const MaxRxCtxBits = 8

func newAV(o *Object) (Impl, error) { return &AV{obj: o, typ: fi.AV_TABLE}, nil }

// Insert is fi_av_insert: it returns the fi_addr of each address.
func (a *AV) Insert(addrs []fi.Addr) ([]uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.insertLocked(addrs)
}

// InsertUserID is fi_av_insert of one address with FI_AV_USER_ID: "the
// caller must specify an fi_addr_t identifier value to associate with
// each address. The provider will record that identifier and use it
// where required as part of any completion event. Note that the output
// from the AV insertion call is unchanged." (fi_av(3)). It returns the
// address's fi_addr; completions of endpoints with FI_AV_USER_ID report
// id as the sender (UserID).
func (a *AV) InsertUserID(id uint64, addr fi.Addr) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out, err := a.insertLocked([]fi.Addr{addr})
	if err != nil {
		return 0, err
	}
	if a.userIDs == nil {
		a.userIDs = map[uint64]uint64{}
	}
	a.userIDs[out[0]] = id
	return out[0], nil
}

// UserID is the user id inserted with fi_addr, if it was (InsertUserID).
func (a *AV) UserID(fiAddr uint64) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok := a.userIDs[fiAddr]
	return id, ok
}

func (a *AV) insertLocked(addrs []fi.Addr) ([]uint64, error) {
	if a.closed {
		return nil, gone(a.obj)
	}
	if len(a.entries)+len(addrs) > MaxAVEntries {
		return nil, Errorf(fi.ENOSPC, "%s would exceed %d entries", a.obj, MaxAVEntries)
	}
	out := make([]uint64, len(addrs))
	for i := range addrs {
		ad := addrs[i]
		out[i] = uint64(len(a.entries))
		a.entries = append(a.entries, &ad)
		a.count++
		a.inserts++
		if a.byAddr == nil {
			a.byAddr = map[fi.Addr]uint64{}
		}
		if _, dup := a.byAddr[ad]; !dup {
			a.byAddr[ad] = out[i]
		}
	}
	return out, nil
}

// Remove is fi_av_remove.
func (a *AV) Remove(fiAddr uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if fiAddr >= uint64(len(a.entries)) || a.entries[fiAddr] == nil {
		return Errorf(fi.ENOENT, "%s has no fi_addr %d", a.obj, fiAddr)
	}
	ad := *a.entries[fiAddr]
	a.entries[fiAddr] = nil
	delete(a.userIDs, fiAddr)
	a.count--
	a.removes++
	if a.byAddr[ad] == fiAddr {
		delete(a.byAddr, ad)
		for i, e := range a.entries {
			if e != nil && *e == ad {
				a.byAddr[ad] = uint64(i)
				break
			}
		}
	}
	return nil
}

// Find is the reverse of Lookup: the fi_addr of addr (the first, if it was
// inserted more than once), as FI_SOURCE reports a sender.
func (a *AV) Find(addr fi.Addr) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.byAddr[addr]
	return i, ok
}

// Lookup is fi_av_lookup. The high rx_ctx_bits of fiAddr, a receive
// context's index (fi_rx_addr), do not take part.
func (a *AV) Lookup(fiAddr uint64) (fi.Addr, bool) {
	addr, _, ok := a.LookupRx(fiAddr)
	return addr, ok
}

// LookupRx is Lookup that also returns the receive context fiAddr names:
// fi_endpoint(3), fi_rx_addr: "fi_addr_t fi_rx_addr(fi_addr_t fi_addr,
// int rx_index, int rx_ctx_bits)", the index in the rx_ctx_bits high
// bits.
func (a *AV) LookupRx(fiAddr uint64) (fi.Addr, uint8, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lookups++
	var rx uint8
	if a.rxCtxBits > 0 {
		shift := 64 - a.rxCtxBits
		rx, fiAddr = uint8(fiAddr>>shift), fiAddr&(1<<shift-1)
	}
	if fiAddr >= uint64(len(a.entries)) || a.entries[fiAddr] == nil {
		return fi.Addr{}, 0, false
	}
	return *a.entries[fiAddr], rx, true
}

// setRxCtxBits is a write of attr/rx_ctx_bits, before the first insert.
func (a *AV) setRxCtxBits(s string) error {
	v, err := ParseUint(strings.TrimSpace(s))
	if err != nil || v > MaxRxCtxBits {
		return Errorf(fi.EINVAL, "bad rx_ctx_bits %q: want 0 to %d (a receive context's index is one byte)", strings.TrimSpace(s), MaxRxCtxBits)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.entries) > 0 {
		return Errorf(fi.EBUSY, "%s has entries; set rx_ctx_bits before inserting", a.obj)
	}
	a.rxCtxBits = int(v)
	return nil
}

// AVEntry is one address of an AV, a line of av/N/addrs.
type AVEntry struct {
	FIAddr uint64  `json:"fi_addr"`
	Addr   string  `json:"addr"`
	UserID *uint64 `json:"user_id"` // inserted with FI_AV_USER_ID (insert_id), else nil
}

// Entries are the AV's addresses in fi_addr order.
func (a *AV) Entries() []AVEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []AVEntry{}
	for i, e := range a.entries {
		if e != nil {
			ent := AVEntry{FIAddr: uint64(i), Addr: e.String()}
			if id, ok := a.userIDs[uint64(i)]; ok {
				ent.UserID = &id
			}
			out = append(out, ent)
		}
	}
	return out
}

// Addrs is the text of av/N/addrs: "FIADDR ADDRESS" per line, and
// " user_id=ID" for an address inserted with one.
func (a *AV) Addrs() string {
	var b strings.Builder
	for _, e := range a.Entries() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// String is the entry's line in av/N/addrs.
func (e AVEntry) String() string {
	s := fmt.Sprintf("%d %s", e.FIAddr, e.Addr)
	if e.UserID != nil {
		s += fmt.Sprintf(" user_id=%d", *e.UserID)
	}
	return s
}

func (a *AV) Status() Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Record{word("type", a.typ.String()), num("count", a.count)}
}

func (a *AV) Attrs() []Attr {
	get := func(f func() string) func() string {
		return func() string {
			a.mu.Lock()
			defer a.mu.Unlock()
			return f()
		}
	}
	return []Attr{
		{Name: "type", Get: get(func() string { return a.typ.String() }), Set: func(s string) error {
			v, err := fi.Parse[fi.AVType](strings.TrimSpace(s))
			if err != nil {
				return Errorf(fi.EINVAL, "%w", err)
			}
			if v != fi.AV_TABLE && v != fi.AV_MAP {
				return Errorf(fi.EINVAL, "av type must be FI_AV_TABLE or FI_AV_MAP")
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.entries) > 0 {
				return Errorf(fi.EBUSY, "%s has entries; set its type before inserting", a.obj)
			}
			a.typ = v
			return nil
		}},
		{Name: "count", Get: get(func() string { return strconv.Itoa(a.count) })},
		{Name: "rx_ctx_bits", Get: get(func() string { return strconv.Itoa(a.rxCtxBits) }), Set: a.setRxCtxBits},
		{Name: "ep_per_node", Get: func() string { return "0" }},
		{Name: "name", Get: func() string { return "(null)" }},
		{Name: "flags", Get: func() string { return "0" }},
	}
}

// Close refuses new addresses from then on.
func (a *AV) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	return nil
}

// ParseAddr reads an ADDR argument: host:port, [v6]:port, or FI_ADDR_STR
// (fi_sockaddr_in://127.0.0.1:7000). A host name is resolved until ctx,
// the request's, ends (fi.ResolveAddr).
func ParseAddr(ctx context.Context, s string) (fi.Addr, error) {
	a, err := fi.ResolveAddr(ctx, s)
	if err != nil {
		return fi.Addr{}, Errorf(fi.EINVAL, "%v", err)
	}
	return a, nil
}
