package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
	"github.com/fabricfs/fabricfs/internal/pptable"
)

// run is one side's whole session: check what -e and -m need, set up, run
// every size, finalize.
func run(o *options) error {
	fl, err := newFlavour(o)
	if err != nil {
		return err
	}
	x, ok := xfers[strings.ToLower(o.mode)]
	if !ok {
		return fmt.Errorf("-m %s: unknown transmit mode: want msg or tagged", o.mode)
	}
	t, err := fabricfs.Open(o.mnt)
	if err != nil {
		return err
	}
	epType := epTypes[strings.ToLower(o.epType)]
	q := fmt.Sprintf("-p %s -t %s -d %s -c %s", o.prov, epType, o.domain, x.caps)
	if _, err := t.GetInfo(q); err != nil {
		return fmt.Errorf("%s/%s offers no %s endpoint with %s (getinfo %q): %w", o.prov, o.domain, epType, x.caps, q, err)
	}
	s, err := newSession(o, t.Domain(o.prov, o.domain), x)
	if err != nil {
		return err
	}
	defer s.close()
	defer fl.close()
	isClient := o.host != ""
	var c *ctrl
	if isClient {
		c, err = startClient(o, fl, s)
	} else {
		c, err = startServer(o, fl, s)
	}
	if err != nil {
		return err
	}
	defer c.close()
	if err := s.runSuite(c, isClient); err != nil {
		return err
	}
	if err := s.finalize(); err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	c.close()
	fl.finish(s)
	return nil
}

// startServer readies the flavour, listens on the control port of the
// address it advertises, waits for the client and brings the data path up.
func startServer(o *options, fl flavour, s *session) (*ctrl, error) {
	local, err := fl.listen(s)
	if err != nil {
		return nil, err
	}
	l, err := listenCtrl(local.Addr().String(), o.srcPort)
	if err != nil {
		return nil, err
	}
	c, err := acceptCtrl(l, o)
	if err != nil {
		return nil, err
	}
	if err := fl.accept(s, c); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// startClient connects to the server's control port and brings the data
// path up.
func startClient(o *options, fl flavour, s *session) (*ctrl, error) {
	c, err := dialCtrl(o)
	if err != nil {
		return nil, err
	}
	if err := fl.connect(s, c); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// ppDefaultSizes are fi_pingpong's sizes without -S.
var ppDefaultSizes = []int{64, 256, 1024, 4096, 65536, 1048576}

// testSizes is generate_test_sizes: the sizes -S asks for, up to the
// transfer size.
func testSizes(sp sizeSpec, txSize uint64) []int {
	var out []int
	switch sp.kind {
	case sizesOne, sizesList:
		for _, n := range sp.sizes {
			if uint64(n) <= txSize {
				out = append(out, n)
			}
		}
	case sizesDefault:
		for _, n := range ppDefaultSizes {
			if uint64(n) > txSize {
				break
			}
			out = append(out, n)
		}
	case sizesAll: // 0, 1, 2, 3, 4, 6, 8, 12...: each power of two and one and a half times it
		for i := 0; ; i++ {
			pow, half := 1<<i, 1<<i+1<<i/2
			if i == 0 {
				pow, half = 0, 1
			}
			if uint64(pow) > txSize {
				break
			}
			out = append(out, pow)
			if uint64(half) > txSize {
				break
			}
			out = append(out, half)
		}
	}
	return out
}

// runSuite is run_suite_pingpong: one ping-pong per size, each with its
// line of the table.
func (s *session) runSuite(c *ctrl, isClient bool) error {
	p := &pptable.Table{W: os.Stdout}
	for _, size := range testSizes(s.o.sizes, s.txSize) {
		if err := s.pingpong(c, isClient, size, p); err != nil {
			return fmt.Errorf("size %d: %w", size, err)
		}
	}
	return nil
}

// pingpong is fi_pingpong's pingpong(): sync, -I round trips timed (the
// client sends first), then the count exchange and the table line.
func (s *session) pingpong(c *ctrl, isClient bool, size int, p *pptable.Table) error {
	if err := c.sync(isClient); err != nil {
		return err
	}
	first, second := s.send, s.recv
	if !isClient {
		first, second = s.recv, s.send
	}
	rxBefore := s.rxDone
	start := time.Now()
	for i := 0; i < s.o.iters; i++ {
		if err := first(size); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
		if err := second(size); err != nil {
			return fmt.Errorf("iteration %d: %w", i, err)
		}
	}
	elapsed := time.Since(start)
	acked, err := c.exchangeCount(isClient, int64(s.rxDone-rxBefore))
	if err != nil {
		return err
	}
	p.Row(size, s.o.iters, acked, elapsed)
	return nil
}
