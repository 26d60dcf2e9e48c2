package core

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// MaxMRLen bounds one memory region: 16 GiB. The host gives a region
// pages only as they are written (a large buffer an application registers
// but never fills costs little), and per-user limits count its length.
const MaxMRLen = 1 << 34

// MaxMRPieces bounds the pieces of other regions' memory a region made of
// windows (`window`) may have; windows onto adjacent bytes of one memory
// count once.
const MaxMRPieces = 256

// MR is a memory region (fi_mr_reg). Its length, access and requested key
// are set through attr/ before the `reg` command registers it; registration
// allocates the region's shared memory (mr/N/data) and gives it a key,
// random and unguessable unless one was requested. On a domain that
// registers memory itself (MemoryRegistrar: FI_MR_PROV_KEY), the shared
// memory is registered with it and the key is the provider's. Work
// requests name it by its desc (attr/desc) and an offset from its first
// byte; peers name it by its key and an address, iova (attr/iova, 0 unless
// set) for byte base (attr/base), reaching only [base, len): FI_MR_VIRT_ADDR
// when iova is the address the application's buffer has, offsets when 0.
//
// A region may instead be made of windows onto other registered regions'
// memory (`window MRID OFFSET LEN` before `reg`, whole pages): its bytes
// are theirs, shared, and `reg` allocates nothing, so the user's memory is
// counted once however many regions reach it. Its key, access, base,
// counters and lifetime are its own; the memory it reaches stays while it
// lives, after the regions it came from close. The libfabric provider
// registers buffers that share pages with live registrations this way.
//
// Closing a region ends it at once for everything that names it: its
// directory, its key (a peer's RMA with it fails as with an unknown key),
// its desc (a new work request naming it fails), its counter bindings.
// Its memory stays mapped, registered and charged only while operations
// taken before the close still use it (use, unuse): the last of them
// frees it.
//
// With an EQ bound (`bind eq ID`, fi_domain_bind's FI_REG_MR for this one
// region), `reg` returns at once and the registration completes
// asynchronously: an FI_MR_COMPLETE event, or an error event, on that EQ
// says when, as fi_domain(3) says: "Binding an event queue to a domain
// with the FI_REG_MR flag indicates that the provider should perform all
// memory registration operations asynchronously, with the completion
// reported through the event queue."
type MR struct {
	obj    *Object
	counts mrStats // stats.go

	mu           sync.Mutex
	length       uint64
	base         uint64 // the byte peers' address iova names
	iova         uint64 // peers' address of byte base
	access       fi.Caps
	requestedKey uint64
	authKey      []byte // fi_mr_attr.auth_key; the owner's domain key from reg when none
	key          uint64
	shm          *ring.Region // after reg: the region's bytes, its own memory or a mapping of its windows
	pieces       []mrPiece    // where those bytes are: its own memory, or its windows in order
	windowed     bool         // made of windows: no memory of its own
	mem          Memory       // the provider's registration of shm, if the domain makes them
	closed       atomic.Bool  // by Close: nothing is registered again, and no new operation uses it
	users        atomic.Int64 // after reg: 1 for the registration, plus the operations using its memory; 0 is final
	eq           *EQ          // where an asynchronous registration reports
	registering  bool         // an asynchronous registration is under way
	cntrs        [2]*Cntr     // bound by BindCntr: peers' reads, peers' writes
}

// mrMem is the shared memory a region allocated at reg, used by that
// region and by every region with a window onto it: it is freed, and its
// charge given back to the user's memory limit, when the last of them
// closes.
type mrMem struct {
	r    *ring.Region
	refs atomic.Int64
}

// release drops one user of the memory.
func (mm *mrMem) release() error {
	if mm.refs.Add(-1) == 0 {
		return mm.r.Close()
	}
	return nil
}

// mrPiece is [off, off+len) of a memory, holding it.
type mrPiece struct {
	mem      *mrMem
	off, len uint64
}

// appendPiece appends p to pieces, or joins it to the last one if it
// continues it (joined true: p's hold is then one too many).
func appendPiece(pieces []mrPiece, p mrPiece) (_ []mrPiece, joined bool) {
	if n := len(pieces); n > 0 && pieces[n-1].mem == p.mem && pieces[n-1].off+pieces[n-1].len == p.off {
		pieces[n-1].len += p.len
		return pieces, true
	}
	return append(pieces, p), false
}

// releasePieces drops the pieces' holds.
func releasePieces(pieces []mrPiece) error {
	var err error
	for _, p := range pieces {
		if e := p.mem.release(); err == nil {
			err = e
		}
	}
	return err
}

// mrDefaultAccess is a region's access until attr/access says otherwise:
// its owner's own operations (sends and receives from it, reads into it,
// writes from it) and no peer's. fi_mr(3): access "Indicates the type of
// operations that the local or a peer endpoint may perform on registered
// memory region"; a peer reads or writes a region only if it has
// FI_REMOTE_READ or FI_REMOTE_WRITE, which must be asked for.
const mrDefaultAccess = fi.SEND | fi.RECV | fi.READ | fi.WRITE

func newMR(o *Object) (Impl, error) {
	return &MR{obj: o, access: mrDefaultAccess, requestedKey: uint64(fi.KEY_NOTAVAIL)}, nil
}

// BindEQ binds the EQ an asynchronous registration reports to.
func (m *MR) BindEQ(eq *EQ) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.frozen(); err != nil {
		return err
	}
	if m.eq != nil {
		return Errorf(fi.EINVAL, "an eq is already bound")
	}
	if err := eq.obj.hold(); err != nil {
		return err
	}
	m.eq = eq
	return nil
}

// BindCntr is fi_mr_bind of a counter, for fi.REMOTE_READ, fi.REMOTE_WRITE
// or both: the counter counts peers' operations that reach the region
// (a write or read of several regions counts on the first one's), as
// fi_mr(3) says: "When binding with a counter, the type of events tracked
// against the memory region is based on the bitwise OR of the following
// flags", FI_REMOTE_WRITE ("Generates an event whenever a remote RMA
// write or atomic operation modifies the memory region") and
// FI_REMOTE_READ. It may come before or after `reg`: the domains do not
// have FI_MR_RMA_EVENT in mr_mode, which would ask for fi_mr_enable after
// the binding. One counter per kind of event, as an endpoint's.
func (m *MR) BindCntr(c *Cntr, flags fi.Caps) error {
	if flags == 0 || flags&^(fi.REMOTE_READ|fi.REMOTE_WRITE) != 0 {
		return Errorf(fi.EINVAL, "bind cntr on a memory region takes remote_read, remote_write")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return gone(m.obj)
	}
	for i, f := range [2]fi.Caps{fi.REMOTE_READ, fi.REMOTE_WRITE} {
		if flags&f != 0 && m.cntrs[i] != nil {
			return Errorf(fi.EINVAL, "%s is already bound for %v", m.cntrs[i].obj, f)
		}
	}
	for i, f := range [2]fi.Caps{fi.REMOTE_READ, fi.REMOTE_WRITE} {
		if flags&f != 0 {
			if err := c.bind(); err != nil {
				return err
			}
			m.cntrs[i] = c
			m.obj.Dom.mrCntrs.Add(1)
		}
	}
	return nil
}

// countRemote counts a peer's operation on the region with key, reported
// to endpoint e of owner owner, on the counter bound to that region for
// it, if any. Domains with no such binding pay one atomic load.
func (d *Domain) countRemote(owner uint32, key uint64, write, failed bool) {
	if d.mrCntrs.Load() == 0 {
		return
	}
	o, ok := d.regionByKey(key)
	if !ok || o.Owner != owner {
		return
	}
	m := o.Impl.(*MR)
	m.mu.Lock()
	c := m.cntrs[0]
	if write {
		c = m.cntrs[1]
	}
	m.mu.Unlock()
	if c != nil {
		c.completed(failed)
	}
}

// Window makes the region's next n bytes bytes [off, off+n) of registered
// region src (whole pages), before reg: the region is then made of its
// windows alone, which reg maps side by side.
func (m *MR) Window(src *Object, off, n uint64) error {
	s, ok := src.Impl.(*MR)
	if !ok || s == m {
		return Errorf(fi.EINVAL, "a window is onto another memory region")
	}
	if src.Owner != m.obj.Owner {
		return Errorf(fi.EACCES, "%s belongs to another user", src)
	}
	page := uint64(os.Getpagesize())
	if n == 0 || off%page != 0 || n%page != 0 {
		return Errorf(fi.EINVAL, "a window is whole pages: offset and length multiples of %d", page)
	}
	pieces, err := s.window(off, n)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.frozen(); err != nil {
		releasePieces(pieces)
		return err
	}
	all, extra := slices.Clone(m.pieces), []mrPiece(nil)
	for _, p := range pieces {
		var joined bool
		if all, joined = appendPiece(all, p); joined {
			extra = append(extra, p)
		}
	}
	if len(all) > MaxMRPieces {
		releasePieces(pieces)
		return Errorf(fi.EINVAL, "%s would be made of more than %d pieces of memory", m.obj, MaxMRPieces)
	}
	releasePieces(extra) // never the last hold: the joined piece has one
	m.pieces, m.windowed = all, true
	return nil
}

// window takes bytes [off, off+n) of the registered region's memory, as
// pieces that hold it.
func (m *MR) window(off, n uint64) ([]mrPiece, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return nil, gone(m.obj)
	}
	if m.shm == nil {
		return nil, Errorf(fi.EINVAL, "memory region %s is not registered", m.obj.ID)
	}
	if off > m.length || n > m.length-off {
		return nil, Errorf(fi.EINVAL, "[%d, %d+%d) is outside memory region %s of %d bytes", off, off, n, m.obj.ID, m.length)
	}
	var out []mrPiece
	at := uint64(0)
	for _, p := range m.pieces {
		lo, hi := max(off, at), min(off+n, at+p.len)
		if lo < hi {
			p.mem.refs.Add(1)
			out = append(out, mrPiece{p.mem, p.off + lo - at, hi - lo})
		}
		at += p.len
	}
	return out, nil
}

// Register is fi_mr_reg for the region's attributes: at once, or with an
// EQ bound, in the background, reported on the EQ.
func (m *MR) Register() error {
	m.mu.Lock()
	if err := m.frozen(); err != nil {
		m.mu.Unlock()
		return err
	}
	eq := m.eq
	if eq == nil {
		defer m.mu.Unlock()
		return m.registerLocked()
	}
	m.registering = true
	m.mu.Unlock()
	go func() {
		m.mu.Lock()
		closed := m.closed.Load() // by the application: nothing to report
		err := m.registerLocked()
		m.registering = false
		m.mu.Unlock()
		if closed {
			return
		}
		if err != nil {
			m.obj.SetErr(fmt.Errorf("reg: %w", err))
			eq.post(EQEvent{FID: m.obj.Path(), Err: Code(err), ProvErrno: provErrno(err)})
			return
		}
		eq.post(EQEvent{Event: fi.MR_COMPLETE, FID: m.obj.Path()})
	}()
	return nil
}

func (m *MR) registerLocked() error {
	if m.closed.Load() {
		return gone(m.obj)
	}
	if m.shm != nil {
		return Errorf(fi.EBUSY, "%s is already registered", m.obj)
	}
	if m.length == 0 {
		return Errorf(fi.EINVAL, "%s has length 0; write attr/len first", m.obj)
	}
	if m.base >= m.length {
		return Errorf(fi.EINVAL, "%s has base %d, not below its length %d", m.obj, m.base, m.length)
	}
	if m.iova+(m.length-m.base) < m.iova {
		return Errorf(fi.EINVAL, "%s at iova %#x: its %d bytes from base would pass address 2^64", m.obj, m.iova, m.length-m.base)
	}
	if m.authKey == nil {
		// "The domain authorization key will be used if the
		// auth_key_size provided is 0."
		m.authKey = m.obj.Dom.AuthKey(m.obj.Owner)
	}
	shm, err := m.memory()
	if err != nil {
		return err
	}
	requested := m.requestedKey
	var mem Memory
	if r, ok := m.obj.Dom.prov.(MemoryRegistrar); ok {
		// The provider's addresses count from the registered buffer's
		// first byte, so peers' addresses count from base.
		if mem, err = r.RegisterMemory(m.obj.Owner, shm.Mem[m.base:], m.iova, m.access, requested, m.authKey); err != nil {
			shm.Close()
			return err
		}
		requested = mem.Key()
	}
	key, err := m.obj.Dom.claimKey(m.obj, requested)
	if err != nil {
		if mem != nil {
			mem.Close()
		}
		shm.Close()
		return err
	}
	m.key, m.shm, m.mem = key, shm, mem
	if !m.windowed {
		own := &mrMem{r: shm}
		own.refs.Store(1)
		m.pieces = []mrPiece{{own, 0, m.length}}
	}
	m.users.Store(1)
	m.counts.registered(m.length)
	return nil
}

// memory makes the region's bytes at reg: its windows mapped side by
// side, or memory of its own, charged to its owner.
func (m *MR) memory() (*ring.Region, error) {
	if !m.windowed {
		return m.obj.Dom.fab.alloc(m.obj, "mr", int(m.length))
	}
	parts := make([]ring.Piece, len(m.pieces))
	sum := uint64(0)
	for i, p := range m.pieces {
		parts[i] = ring.Piece{From: p.mem.r, Off: int(p.off), Len: int(p.len)}
		sum += p.len
	}
	if sum != m.length {
		return nil, Errorf(fi.EINVAL, "%s's windows hold %d bytes, not its length %d", m.obj, sum, m.length)
	}
	r, err := ring.MapPieces(parts)
	if err != nil {
		return nil, Errorf(fi.ENOMEM, "mapping %s's windows: %v", m.obj, err)
	}
	return r, nil
}

// claimKey gives o (a memory region being registered) its key in the
// domain's index: the requested one (or the provider's), unless another
// region has it (fi.ENOKEY, as fi_mr_reg), or with fi.KEY_NOTAVAIL a
// random free one.
func (d *Domain) claimKey(o *Object, requested uint64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mrKeys == nil {
		d.mrKeys = map[uint64]*Object{}
	}
	key := requested
	if requested == uint64(fi.KEY_NOTAVAIL) {
		for {
			var b [8]byte
			rand.Read(b[:])
			key = binary.LittleEndian.Uint64(b[:])
			if _, used := d.mrKeys[key]; !used && key != uint64(fi.KEY_NOTAVAIL) {
				break
			}
		}
	} else if _, used := d.mrKeys[key]; used {
		return 0, Errorf(fi.ENOKEY, "key %#x is in use by another memory region of domain %s", key, d.Name)
	}
	d.mrKeys[key] = o
	return key, nil
}

// regionByKey finds the registered memory region with key.
func (d *Domain) regionByKey(key uint64) (*Object, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.mrKeys[key]
	return o, ok
}

// Region is the registered memory, for mr/N/data.
func (m *MR) Region() (*ring.Region, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed.Load() {
		return nil, gone(m.obj)
	}
	if m.windowed {
		return nil, Errorf(fi.EOPNOTSUPP, "%s is made of windows onto other regions' memory, whose data files hold its bytes", m.obj)
	}
	if m.shm == nil {
		return nil, Errorf(fi.EOPBADSTATE, "%s is not registered; write 'reg' to its ctl first", m.obj)
	}
	return m.shm, nil
}

// sliceMem returns [off, off+n) of the registered memory, for a local
// operation, with the provider's registration it lies in and its offset
// there: the registration (if the domain makes them) covers [base, len),
// so a buffer starting below base gets none and the provider registers it
// on its own.
func (m *MR) sliceMem(off, n uint64) ([]byte, Memory, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shm == nil {
		return nil, nil, 0, Errorf(fi.EINVAL, "memory region %s is not registered", m.obj.ID)
	}
	if off > m.length || n > m.length-off {
		return nil, nil, 0, Errorf(fi.EINVAL, "[%d, %d+%d) is outside memory region %s of %d bytes", off, off, n, m.obj.ID, m.length)
	}
	if off < m.base {
		return m.shm.Mem[off : off+n : off+n], nil, 0, nil
	}
	return m.shm.Mem[off : off+n : off+n], m.mem, off - m.base, nil
}

// remote returns the n bytes a peer's address addr names: [base+addr,
// base+addr+n), which must lie inside the region.
func (m *MR) remote(addr, n uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shm == nil {
		return nil, Errorf(fi.EINVAL, "memory region %s is not registered", m.obj.ID)
	}
	reach := m.length - m.base
	if addr < m.iova || addr-m.iova > reach || n > reach-(addr-m.iova) {
		return nil, Errorf(fi.EINVAL, "[%#x, %#x+%d) is outside memory region %s's %d bytes from address %#x", addr, addr, n, m.obj.ID, reach, m.iova)
	}
	off := m.base + addr - m.iova
	return m.shm.Mem[off : off+n : off+n], nil
}

// Key is fi_mr_key: the key, or fi.KEY_NOTAVAIL before registration.
func (m *MR) Key() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shm == nil {
		return uint64(fi.KEY_NOTAVAIL)
	}
	return m.key
}

func (m *MR) Status() Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	state := "unregistered"
	if m.shm != nil {
		state = "registered"
	} else if m.registering {
		state = "registering"
	}
	return Record{bare("state", state), num("len", m.length), flagField("access", m.access.String())}
}

func (m *MR) frozen() error {
	if m.closed.Load() {
		return gone(m.obj)
	}
	if m.shm != nil {
		return Errorf(fi.EBUSY, "%s is registered; set its attributes before reg", m.obj)
	}
	if m.registering {
		return Errorf(fi.EBUSY, "%s is being registered", m.obj)
	}
	return nil
}

// Links shows the bound EQ.
func (m *MR) Links() []Link {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.eq == nil {
		return nil
	}
	return []Link{{"eq", m.eq.obj}}
}

func (m *MR) Attrs() []Attr {
	return []Attr{
		guarded(&m.mu, "len", m.frozen, func() string { return strconv.FormatUint(m.length, 10) }, func(s string) error {
			v, err := parseSize(s, 1, MaxMRLen)
			if err == nil {
				m.length = v
			}
			return err
		}),
		guarded(&m.mu, "access", m.frozen, func() string { return m.access.String() }, func(s string) error {
			v, err := fi.Parse[fi.Caps](s)
			if err != nil {
				return Errorf(fi.EINVAL, "%w", err)
			}
			const valid = fi.SEND | fi.RECV | fi.READ | fi.WRITE | fi.REMOTE_READ | fi.REMOTE_WRITE
			if v&^valid != 0 {
				return Errorf(fi.EINVAL, "access takes FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE")
			}
			m.access = v
			return nil
		}),
		guarded(&m.mu, "base", m.frozen, func() string { return strconv.FormatUint(m.base, 10) }, func(s string) error {
			v, err := parseSize(s, 0, MaxMRLen-1)
			if err == nil {
				m.base = v
			}
			return err
		}),
		guarded(&m.mu, "iova", m.frozen, func() string { return fmt.Sprintf("%#x", m.iova) }, func(s string) error {
			v, err := ParseUint(s)
			if err == nil {
				m.iova = v
			}
			return err
		}),
		guarded(&m.mu, "requested_key", m.frozen, func() string { return fmt.Sprintf("%#x", m.requestedKey) }, func(s string) error {
			v, err := ParseUint(s)
			if err == nil {
				m.requestedKey = v
			}
			return err
		}),
		guarded(&m.mu, "auth_key", m.frozen, func() string { return authKeyText(m.authKey) }, func(s string) error {
			k, err := parseAuthKey(s)
			if err == nil {
				m.authKey = k
			}
			return err
		}),
		guarded(&m.mu, "auth_key_size", nil, func() string { return strconv.Itoa(len(m.authKey)) }, nil),
		{Name: "key", Get: func() string { return fmt.Sprintf("%#x", m.Key()) }},
		{Name: "desc", Get: func() string { return fmt.Sprintf("%#x", m.obj.Serial) }},
		{Name: "offset", Get: func() string { return "0" }},
		{Name: "iface", Get: func() string { return "FI_HMEM_SYSTEM" }},
		{Name: "mapping", Get: func() string { return m.obj.Dom.fab.Shm.Mode }},
	}
}

func (m *MR) Close() error {
	m.mu.Lock()
	eq, cntrs := m.eq, m.cntrs
	m.eq, m.cntrs = nil, [2]*Cntr{}
	m.closed.Store(true)
	registered := m.shm != nil
	var err error
	if !registered {
		err = releasePieces(m.pieces) // windows taken before reg
		m.pieces = nil
	}
	m.mu.Unlock()
	if eq != nil {
		eq.obj.drop()
	}
	for _, c := range cntrs {
		if c != nil {
			m.obj.Dom.mrCntrs.Add(-1)
			c.unbind()
		}
	}
	if !registered {
		return err
	}
	d := m.obj.Dom
	d.mu.Lock()
	if d.mrKeys[m.key] == m.obj {
		delete(d.mrKeys, m.key)
	}
	d.mu.Unlock()
	if m.users.Add(-1) == 0 { // the registration's
		return m.free()
	}
	return nil
}

// use holds the registered region's memory for an operation, which calls
// unuse once done with it. It fails (false) before reg and once the
// region is closed: an operation taken then does not reach it.
func (m *MR) use() bool {
	for {
		n := m.users.Load()
		if n == 0 || m.closed.Load() {
			return false
		}
		if m.users.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unuse lets go of what use held; the last user of a closed region frees
// its memory.
func (m *MR) unuse() {
	if m.users.Add(-1) == 0 {
		if err := m.free(); err != nil {
			m.obj.SetErr(fmt.Errorf("freeing its memory: %w", err))
		}
	}
}

// free gives back the memory of a closed region that nothing uses: the
// provider's registration, its mapping of windows, its holds on memory.
func (m *MR) free() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var err error
	if m.mem != nil {
		err = m.mem.Close()
		m.mem = nil
	}
	// A region's own memory goes with its last user (its own piece); a
	// mapping of windows is the region's alone.
	if m.windowed {
		if e := m.shm.Close(); err == nil {
			err = e
		}
	}
	if e := releasePieces(m.pieces); err == nil {
		err = e
	}
	m.shm, m.pieces = nil, nil
	return err
}
