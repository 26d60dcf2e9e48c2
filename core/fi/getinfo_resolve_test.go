package fi

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// hangingDNS makes host look-ups ask a Go resolver whose DNS server never
// answers: its Dial blocks, whatever its context, until the test ends. A
// look-up ends early only if the context given to it ends.
func hangingDNS(t *testing.T) {
	release := make(chan struct{})
	host := lookupHost
	t.Cleanup(func() {
		lookupHost = host
		close(release)
	})
	r := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		<-release
		return nil, errors.New("test over")
	}}
	lookupHost = func(ctx context.Context, h string) ([]netip.Addr, error) { return r.LookupNetIP(ctx, "ip", h) }
}

// within runs f and fails the test if it has not returned after d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s still waits on DNS %v after its context ended", what, d)
	}
}

// TestResolveCanceled: a name look-up of the ctl verbs' ADDR arguments and
// of getinfo's node gives up when the request's context ends (an
// interrupted shell command), rather than leaving the FUSE handler waiting
// on DNS.
func TestResolveCanceled(t *testing.T) {
	hangingDNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	within(t, 5*time.Second, "ResolveAddr", func() {
		if a, err := ResolveAddr(ctx, "stuck-addr.test:7000"); err == nil || !strings.Contains(err.Error(), "cannot resolve") {
			t.Errorf("ResolveAddr = %v, %v; want a resolution error", a, err)
		}
	})
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	within(t, 5*time.Second, "GetInfo", func() {
		out, err := GetInfo(ctx, APIVersion, "stuck-node.test", "7000", 0, nil, testOffered())
		if !errors.Is(err, ENODATA) || !strings.Contains(err.Error(), "cannot resolve") {
			t.Errorf("GetInfo = %v, %v; want ENODATA, cannot resolve", ids(out), err)
		}
	})
}
