package core_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs"
)

// verbsDomain opens a fabric over the verbs provider with one device on
// 127.0.0.1 (a free UDP port) and returns its domain.
func verbsDomain(t *testing.T) *core.Domain { return verbsDomainOf(t, verbsProvider(t)) }

// verbsProvider is the verbs provider with one device on 127.0.0.1, on a
// free UDP port, closed at the end of the test.
func verbsProvider(t *testing.T) *verbs.Provider {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	p, err := verbs.New(verbs.Config{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// verbsDomainOf opens a fabric over p, the verbs provider of
// verbsProvider or one wrapping it, and returns its device's domain.
func verbsDomainOf(t *testing.T, p core.Provider) *core.Domain {
	t.Helper()
	f, err := core.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	d, ok := f.Domain("verbs", "rxe_127_0_0_1")
	if !ok {
		t.Fatal("no verbs/rxe_127_0_0_1 domain")
	}
	return d
}

// setAttrs sets a region's attributes by name.
func setAttrs(t *testing.T, o *core.Object, attrs map[string]string) {
	t.Helper()
	for _, a := range o.Impl.Attrs() {
		if v, ok := attrs[a.Name]; ok {
			if err := a.Set(v); err != nil {
				t.Fatalf("%s = %s: %v", a.Name, v, err)
			}
		}
	}
}

// TestMRBase: a peer's address A in a region with attr/base B names byte
// B+A, on tcp (core resolves it: EndpointEvents.Region) and on verbs (the
// provider does, from core's registration of the bytes from B on); the
// bytes below B are out of the peer's reach, and a range past the end is
// the error a bad range is (the connection ends). The owner's own
// operations name bytes from 0. With attr/iova I (FI_MR_VIRT_ADDR: "Registered
// memory regions are referenced by peers using the virtual address of the
// registered memory region, rather than a 0-based offset", fi_domain(3)),
// address I+A names byte B+A, and addresses below I are out of reach.
func TestMRBase(t *testing.T) {
	for _, c := range []struct {
		name string
		dom  func(*testing.T) *core.Domain
	}{
		{"tcp", func(t *testing.T) *core.Domain { return lo(t) }},
		{"verbs", verbsDomain},
	} {
		t.Run(c.name, func(t *testing.T) { testMRBase(t, c.dom, 0) })
		t.Run(c.name+"/iova", func(t *testing.T) { testMRBase(t, c.dom, 0x7f3a12345000) })
	}
}

func testMRBase(t *testing.T, dom func(*testing.T) *core.Domain, iova uint64) {
	const base, size = 100, 4096
	ctx := context.Background()
	// setup connects two endpoints, registers a local region x of 4096
	// bytes and a target region y of 4096 bytes with base 100 and remote
	// access, y's bytes all 0xee.
	setup := func() (a *core.Object, eq *core.EQ, xm, ym []byte, key uint64) {
		d := dom(t)
		a, _, _, eq, _ = pair(t, d, "bind cq c send,recv")
		x := create(t, d, core.KindMR, "x")
		setAttrs(t, x, map[string]string{"len": fmt.Sprint(size)})
		y := create(t, d, core.KindMR, "y")
		setAttrs(t, y, map[string]string{"len": fmt.Sprint(size), "base": fmt.Sprint(base), "access": "FI_REMOTE_WRITE,FI_REMOTE_READ",
			"iova": fmt.Sprintf("%#x", iova)})
		run(t, x, "reg")
		run(t, y, "reg")
		for _, at := range y.Impl.Attrs() {
			if at.Name == "base" && at.Get() != fmt.Sprint(base) {
				t.Errorf("attr/base reads %q, want %d", at.Get(), base)
			}
		}
		xr, err := x.Impl.(*core.MR).Region()
		if err != nil {
			t.Fatal(err)
		}
		yr, err := y.Impl.(*core.MR).Region()
		if err != nil {
			t.Fatal(err)
		}
		copy(yr.Mem, bytes.Repeat([]byte{0xee}, size))
		return a, eq, xr.Mem, yr.Mem, y.Impl.(*core.MR).Key()
	}
	untouched := func(ym []byte, from, to int) {
		t.Helper()
		if !bytes.Equal(ym[from:to], bytes.Repeat([]byte{0xee}, to-from)) {
			t.Errorf("bytes [%d, %d) of the target changed", from, to)
		}
	}

	a, _, xm, ym, key := setup()
	copy(xm, "payload!")
	if err := a.Ctl(ctx, 0, fmt.Sprintf("write x 0 8 %#x %#x", iova+8, key)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); string(ym[base+8:base+16]) != "payload!"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a write at address 8 left bytes [%d, %d) as %q", base+8, base+16, ym[base+8:base+16])
		}
	}
	untouched(ym, 0, base+8)
	copy(ym[base+40:], "secret!!")
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 100 8 %#x %#x", iova+40, key)); err != nil || string(xm[100:108]) != "secret!!" {
		t.Errorf("read at address 40: %v, got %q, want the target's bytes at %d", err, xm[100:108], base+40)
	}
	// The last byte peers reach is len-base-1.
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 200 1 %#x %#x", iova+size-base-1, key)); err != nil || xm[200] != 0xee {
		t.Errorf("read of the last byte in reach: %v, got %#x", err, xm[200])
	}

	// A range past len-base is a bad range: the target refuses it and
	// ends the connection, its region untouched.
	a, eq, _, ym, key := setup()
	a.Ctl(ctx, 0, fmt.Sprintf("write x 0 8 %#x %#x", iova+size-base-4, key))
	if ev := events(t, eq, 1); !strings.Contains(ev, "fid=ep/") {
		t.Errorf("after a write past the region's reach, EQ has %q, want the connection's end", ev)
	}
	untouched(ym, 0, size)
	a, _, xm, _, key = setup()
	copy(xm, "unread!!")
	if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 0 8 %#x %#x", iova+size-base-4, key)); err == nil {
		t.Error("a read past the region's reach succeeded")
	}
	if string(xm[:8]) != "unread!!" {
		t.Errorf("a read past the region's reach brought %q", xm[:8])
	}
	if iova >= 8 {
		a, _, xm, _, key = setup()
		copy(xm, "unread!!")
		if err := a.Ctl(ctx, 0, fmt.Sprintf("read x 0 8 %#x %#x", iova-8, key)); err == nil {
			t.Error("a read below the region's iova succeeded")
		}
		if string(xm[:8]) != "unread!!" {
			t.Errorf("a read below the region's iova brought %q", xm[:8])
		}
	}
}

// TestMRBaseAttr: base is writable before reg only, must be below the
// length at reg (EINVAL), and reads 0 by default.
func TestMRBaseAttr(t *testing.T) {
	d := lo(t)
	o := create(t, d, core.KindMR, "m")
	var base core.Attr
	for _, a := range o.Impl.Attrs() {
		if a.Name == "base" {
			base = a
		}
	}
	if base.Set == nil || base.Get() != "0" {
		t.Fatalf("attr/base: %+v, want writable and 0", base)
	}
	setAttrs(t, o, map[string]string{"len": "64", "base": "64"})
	wantCode(t, "reg with base 64 of 64 bytes", o.Ctl(context.Background(), 0, "reg"), fi.EINVAL)
	setAttrs(t, o, map[string]string{"base": "63"})
	run(t, o, "reg")
	wantCode(t, "base after reg", base.Set("0"), fi.EBUSY)
}
