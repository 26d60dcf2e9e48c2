// Package provtest is test support shared by the providers' tests: records
// of an endpoint's and a passive endpoint's events that tests wait on with a
// deadline, and a table of memory a test exposes to peers' RMA.
package provtest

import (
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"golang.org/x/sys/unix"
)

// WaitTime is how long a test waits for an event before it fails.
const WaitTime = 10 * time.Second

// Failure is one Failed event: the error and the peer's data.
type Failure struct {
	Err  error
	Data []byte
}

// EPEvents records an endpoint's events (core.EndpointEvents): connection
// events on channels, remote completions on RemoteCh. A peer's RMA reaches
// the memory added with Expose. OwnerUID is the owner it names (core.Owned).
type EPEvents struct {
	Regions
	ConnectedCh chan []byte
	ShutdownCh  chan struct{}
	FailedCh    chan Failure
	RemoteCh    chan core.Completion
	OwnerUID    uint32

	mu sync.Mutex
	n  int // connection events so far
}

// NewEPEvents makes an empty record.
func NewEPEvents() *EPEvents {
	return &EPEvents{ConnectedCh: make(chan []byte, 4), ShutdownCh: make(chan struct{}, 4),
		FailedCh: make(chan Failure, 4), RemoteCh: make(chan core.Completion, 1<<10)}
}

// Owner is core.Owned's: OwnerUID.
func (ev *EPEvents) Owner() uint32 { return ev.OwnerUID }

func (ev *EPEvents) inc() {
	ev.mu.Lock()
	ev.n++
	ev.mu.Unlock()
}

// Count is the number of connection events so far.
func (ev *EPEvents) Count() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.n
}

// Connected records a Connected event.
func (ev *EPEvents) Connected(data []byte) { ev.inc(); ev.ConnectedCh <- data }

// Shutdown records a Shutdown event.
func (ev *EPEvents) Shutdown() { ev.inc(); ev.ShutdownCh <- struct{}{} }

// Failed records a Failed event.
func (ev *EPEvents) Failed(err error, d []byte) { ev.inc(); ev.FailedCh <- Failure{err, d} }

// Remote records a remote completion.
func (ev *EPEvents) Remote(c core.Completion) { ev.RemoteCh <- c }

// WaitConnected waits for Connected and returns its data; any other event
// fails the test.
func (ev *EPEvents) WaitConnected(t testing.TB) []byte {
	t.Helper()
	select {
	case d := <-ev.ConnectedCh:
		return d
	case f := <-ev.FailedCh:
		t.Fatalf("connection failed: %v (data %q)", f.Err, f.Data)
	case <-ev.ShutdownCh:
		t.Fatalf("connection shut down instead of connecting")
	case <-time.After(WaitTime):
		t.Fatalf("no Connected event")
	}
	return nil
}

// WaitFailed waits for Failed; any other event fails the test.
func (ev *EPEvents) WaitFailed(t testing.TB) Failure {
	t.Helper()
	select {
	case f := <-ev.FailedCh:
		return f
	case <-ev.ConnectedCh:
		t.Fatalf("Connected, want Failed")
	case <-ev.ShutdownCh:
		t.Fatalf("Shutdown, want Failed")
	case <-time.After(WaitTime):
		t.Fatalf("no Failed event")
	}
	return Failure{}
}

// WaitShutdown waits for Shutdown; Failed fails the test.
func (ev *EPEvents) WaitShutdown(t testing.TB) {
	t.Helper()
	select {
	case <-ev.ShutdownCh:
	case f := <-ev.FailedCh:
		t.Fatalf("Failed (%v), want Shutdown", f.Err)
	case <-time.After(WaitTime):
		t.Fatalf("no Shutdown event")
	}
}

// WaitShutdownOrFailed waits for the end of the connection, either way.
func (ev *EPEvents) WaitShutdownOrFailed(t testing.TB) {
	t.Helper()
	select {
	case <-ev.ShutdownCh:
	case <-ev.FailedCh:
	case <-time.After(WaitTime):
		t.Fatalf("no Shutdown or Failed event")
	}
}

// PEPEvents records a passive endpoint's events (core.PassiveEvents).
type PEPEvents struct {
	Reqs     chan core.ConnReq
	FailedCh chan error
}

// NewPEPEvents makes an empty record.
func NewPEPEvents() *PEPEvents {
	return &PEPEvents{Reqs: make(chan core.ConnReq, 64), FailedCh: make(chan error, 4)}
}

// ConnReq records a connection request.
func (ev *PEPEvents) ConnReq(r core.ConnReq) { ev.Reqs <- r }

// Failed records the listener's failure.
func (ev *PEPEvents) Failed(err error) { ev.FailedCh <- err }

// WaitReq waits for a connection request; a failure fails the test.
func (ev *PEPEvents) WaitReq(t testing.TB) core.ConnReq {
	t.Helper()
	select {
	case r := <-ev.Reqs:
		return r
	case err := <-ev.FailedCh:
		t.Fatalf("listener failed: %v", err)
	case <-time.After(WaitTime):
		t.Fatalf("no connection request")
	}
	return nil
}

// Regions is memory a test exposes to peers' RMA, by key. Its zero value
// exposes nothing.
type Regions struct {
	mu sync.Mutex
	m  map[uint64]region
}

type region struct {
	buf    []byte
	access fi.Caps
}

// Expose lets peers reach buf under key with access.
func (rs *Regions) Expose(key uint64, buf []byte, access fi.Caps) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[uint64]region{}
	}
	rs.m[key] = region{buf, access}
}

// Region is core.EndpointEvents': bytes [addr, addr+n) of the memory
// exposed under key, if access is allowed.
func (rs *Regions) Region(key, addr, n uint64, access fi.Caps) ([]byte, func(), error) {
	rs.mu.Lock()
	r, ok := rs.m[key]
	rs.mu.Unlock()
	switch {
	case !ok:
		return nil, nil, core.Errorf(fi.EINVAL, "test: no memory region with key %#x", key)
	case r.access&access != access:
		return nil, nil, core.Errorf(fi.EACCES, "test: region %#x does not allow %v", key, access)
	case addr > uint64(len(r.buf)) || n > uint64(len(r.buf))-addr:
		return nil, nil, core.Errorf(fi.EINVAL, "test: bytes %d+%d of region %#x", addr, n, key)
	}
	return r.buf[addr : addr+n], func() {}, nil
}

// DialAs connects to raddr from laddr (empty: the kernel's choice) with a
// socket owned by uid, as another user's process would: the socket is
// made while the thread's fsuid is uid. The connection closes at the
// test's end.
func DialAs(t testing.TB, uid int, laddr, raddr string) *net.TCPConn {
	t.Helper()
	if unix.Geteuid() != 0 {
		t.Skip("making another user's socket needs root")
	}
	var d net.Dialer
	if laddr != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(laddr)}
	}
	runtime.LockOSThread()
	unix.Setfsuid(uid)
	c, err := d.Dial("tcp", raddr)
	unix.Setfsuid(0)
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// Account is one user's Connections as core.Fabric keeps them, with a
// limit: a provider's test events embed it to be charged (core.Accounter).
type Account struct {
	mu          sync.Mutex
	held, limit int64
}

// NewAccount is an Account that holds at most limit connections.
func NewAccount(limit int64) *Account { return &Account{limit: limit} }

// Take charges n of r, past the limit failing as core.Fabric does.
func (a *Account) Take(r core.Resource, n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r == core.Connections && a.held+n > a.limit {
		return core.Errorf(fi.ENOSPC, "uid 1000 holds %d of %s, the limit is %d", a.held, r, a.limit)
	}
	a.held += n
	return nil
}

// Give returns n of r.
func (a *Account) Give(r core.Resource, n int64) {
	a.mu.Lock()
	a.held -= n
	a.mu.Unlock()
}

// Held is what the account holds now.
func (a *Account) Held() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// WaitHeld waits up to WaitTime until the account holds n.
func (a *Account) WaitHeld(t testing.TB, what string, n int64) {
	t.Helper()
	deadline := time.Now().Add(WaitTime)
	for a.Held() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the account holds %d connections, want %d", what, a.Held(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
