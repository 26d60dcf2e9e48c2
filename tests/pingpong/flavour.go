package main

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/core/fi"
)

// flavour is an endpoint type (-e): how the two sides reach each other's
// endpoint through the control connection, and how they part. The session
// does the rest, the same for every flavour.
type flavour interface {
	// listen readies the server before the control connection and returns
	// the address it will advertise.
	listen(s *session) (netip.AddrPort, error)
	// accept brings the server's data path up over c.
	accept(s *session, c *ctrl) error
	// connect brings the client's data path up over c.
	connect(s *session, c *ctrl) error
	// finish ends the data path after the finalize.
	finish(s *session)
	// close releases the flavour's objects.
	close()
}

// epTypes are the endpoint types -e takes, by libfabric name.
var epTypes = map[string]string{"msg": "FI_EP_MSG", "rdm": "FI_EP_RDM", "dgram": "FI_EP_DGRAM"}

// newFlavour returns -e's flavour, or why there is none.
func newFlavour(o *options) (flavour, error) {
	switch strings.ToLower(o.epType) {
	case "msg":
		return &msgFlavour{o: o}, nil
	case "rdm":
		return &rdmFlavour{o: o}, nil
	case "dgram":
		return nil, fmt.Errorf("-e %s: ffpingpong does not implement %s yet (fabricfs's tcp provider offers FI_EP_MSG and FI_EP_RDM)", o.epType, epTypes[strings.ToLower(o.epType)])
	}
	return nil, fmt.Errorf("-e %s: unknown endpoint type: want msg or rdm", o.epType)
}

// msgFlavour is FI_EP_MSG (run_pingpong_msg): the server listens on a
// passive endpoint and sends its name; the client connects to it with no
// private data; the server accepts. Both post their first receive before
// connecting or accepting.
type msgFlavour struct {
	o     *options
	eq    *fabricfs.EQ
	pep   *fabricfs.PEP
	local netip.AddrPort // the pep's address
}

func (m *msgFlavour) newEQ(s *session) error {
	eq, err := s.d.NewEQ()
	if err != nil {
		return fmt.Errorf("eq: %w", err)
	}
	m.eq = eq
	return nil
}

func (m *msgFlavour) listen(s *session) (netip.AddrPort, error) {
	if err := m.newEQ(s); err != nil {
		return netip.AddrPort{}, err
	}
	pep, err := s.d.NewPEP()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("pep: %w", err)
	}
	m.pep = pep
	local, err := pep.Listen(m.eq, "") // the domain's address, a free port
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("pep listen: %w", err)
	}
	a, err := fi.ParseAddr(local)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%s/local: %w", pep.Dir, err)
	}
	m.local = a.IP
	m.o.debugf("server: pep %s listens on %s", pep.Name(), local)
	return m.local, nil
}

func (m *msgFlavour) accept(s *session, c *ctrl) error {
	if err := c.sendName(encodeSockaddr(m.local)); err != nil {
		return err
	}
	ep, err := within(m.o.timeout, "waiting for the connection request", m.pep.Request)
	if err != nil {
		return err
	}
	m.o.debugf("server: connection request: %s", ep.Name())
	if err := s.attach(ep, "bind eq "+m.eq.ID()); err != nil {
		return err
	}
	if err := ep.Ctl("accept"); err != nil {
		return err
	}
	return m.waitConnected(ep)
}

func (m *msgFlavour) connect(s *session, c *ctrl) error {
	name, err := c.recvName()
	if err != nil {
		return err
	}
	peer, err := decodeSockaddr(name)
	if err != nil {
		return err
	}
	peer = reachable(peer, c.conn.RemoteAddr())
	if err := m.newEQ(s); err != nil {
		return err
	}
	ep, err := s.d.NewEP()
	if err != nil {
		return fmt.Errorf("ep: %w", err)
	}
	if err := s.attach(ep, "bind eq "+m.eq.ID()); err != nil {
		return err
	}
	m.o.debugf("client: %s connects to %s", ep.Name(), peer)
	if err := ep.Ctl("connect " + peer.String()); err != nil {
		return err
	}
	return m.waitConnected(ep)
}

func (m *msgFlavour) waitConnected(ep *fabricfs.EP) error {
	_, err := within(m.o.timeout, "waiting for the connection", func() (struct{}, error) {
		return struct{}{}, m.eq.WaitConnected(m.o.timeout, ep)
	})
	return err
}

// finish shuts the connection down, as fi_pingpong does after its
// finalize. The peer may have shut it down first, so a failure is no
// error.
func (m *msgFlavour) finish(s *session) {
	if err := s.ep.Ctl("shutdown"); err != nil {
		m.o.debugf("shutdown: %v", err)
	}
}

func (m *msgFlavour) close() {
	if m.pep != nil {
		m.pep.Close()
	}
	if m.eq != nil {
		m.eq.Close()
	}
}

// reachable replaces an unspecified address the peer advertised (0.0.0.0,
// a server listening on every interface) with the address its control
// connection came from.
func reachable(ap netip.AddrPort, ctrlPeer net.Addr) netip.AddrPort {
	if !ap.Addr().IsUnspecified() {
		return ap
	}
	if t, ok := ctrlPeer.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(t.IP); ok {
			return netip.AddrPortFrom(ip.Unmap(), ap.Port())
		}
	}
	return ap
}

// within runs f, giving up after d: reads of the tree's queue files
// (listen, events) block without a time limit of their own. A goroutine
// left blocked ends with the program, which fails.
func within[T any](d time.Duration, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(d):
		var zero T
		return zero, fmt.Errorf("%s: nothing after %v", what, d)
	}
}

// rdmFlavour is FI_EP_RDM (run_pingpong_rdm, pp_init_fabric): each side
// makes its endpoint with an AV; the server sends its endpoint's name and
// receives the client's; the client receives the server's, makes its
// endpoint and sends its name; each inserts the peer's name into its AV
// and sends to that fi_addr. There is no connection to make or end:
// fabricfs, like libfabric's rxm, connects on the first send (the
// client's, after the first sync).
type rdmFlavour struct {
	o     *options
	av    *fabricfs.AV
	local netip.AddrPort // the endpoint's name
}

// open makes the session's endpoint: FI_EP_RDM, with the AV.
func (r *rdmFlavour) open(s *session) error {
	av, err := s.d.NewAV()
	if err != nil {
		return fmt.Errorf("av: %w", err)
	}
	r.av = av
	ep, err := s.d.NewEP()
	if err != nil {
		return fmt.Errorf("ep: %w", err)
	}
	s.ep = ep
	if err := ep.SetAttr("type", "FI_EP_RDM"); err != nil {
		return err
	}
	if err := s.attach(ep, "bind av "+av.ID()); err != nil {
		return err
	}
	local, err := ep.Local()
	if err != nil {
		return err
	}
	a, err := fi.ParseAddr(local)
	if err != nil {
		return fmt.Errorf("%s/local: %w", ep.Dir, err)
	}
	r.local = a.IP
	r.o.debugf("%s is %s", ep.Name(), local)
	return nil
}

func (r *rdmFlavour) listen(s *session) (netip.AddrPort, error) {
	if err := r.open(s); err != nil {
		return netip.AddrPort{}, err
	}
	return r.local, nil
}

func (r *rdmFlavour) accept(s *session, c *ctrl) error {
	if err := c.sendName(encodeSockaddr(r.local)); err != nil {
		return err
	}
	return r.insertPeer(s, c)
}

func (r *rdmFlavour) connect(s *session, c *ctrl) error {
	name, err := c.recvName()
	if err != nil {
		return err
	}
	peer, err := decodeSockaddr(name)
	if err != nil {
		return err
	}
	if err := r.open(s); err != nil {
		return err
	}
	if err := c.sendName(encodeSockaddr(r.local)); err != nil {
		return err
	}
	return r.insert(s, reachable(peer, c.conn.RemoteAddr()))
}

// insertPeer receives the peer's name and inserts it.
func (r *rdmFlavour) insertPeer(s *session, c *ctrl) error {
	name, err := c.recvName()
	if err != nil {
		return err
	}
	peer, err := decodeSockaddr(name)
	if err != nil {
		return err
	}
	return r.insert(s, peer)
}

// insert puts peer into the AV; sends go to its fi_addr.
func (r *rdmFlavour) insert(s *session, peer netip.AddrPort) error {
	a, err := r.av.Insert(peer.String())
	if err != nil {
		return fmt.Errorf("inserting the peer's address %s: %w", peer, err)
	}
	s.dest = a
	r.o.debugf("peer %s is fi_addr %d", peer, a)
	return nil
}

func (r *rdmFlavour) finish(*session) {}

func (r *rdmFlavour) close() {
	if r.av != nil {
		r.av.Close()
	}
}
