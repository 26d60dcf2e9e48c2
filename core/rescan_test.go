package core_test

import (
	"sync"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// growing is the tcp provider with a domain "hot0" that appears at the
// first Rescan after arm, as an interface that comes up does.
type growing struct {
	core.Provider
	mu    sync.Mutex
	armed bool
	scans int // Rescan calls
	hot   []*fi.Info
}

func (g *growing) Infos() []*fi.Info {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append(g.Provider.Infos(), fi.CloneInfos(g.hot)...)
}

func (g *growing) Rescan() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.scans++
	if g.armed && g.hot == nil {
		in := g.Provider.Infos()[0].Clone()
		in.DomainAttr.Name = "hot0"
		g.hot = []*fi.Info{in}
	}
	return nil
}

func (g *growing) OpenDomain(name string) (core.ProviderDomain, error) {
	if name == "hot0" {
		return g.Provider.OpenDomain("lo")
	}
	return g.Provider.OpenDomain(name)
}

// TestRescan: Fabric.Rescan opens the domains a Rescanner added, once,
// after the open ones, which stay as they were with their objects; it may
// run beside readers of the domains (go test -race).
func TestRescan(t *testing.T) {
	inner, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	g := &growing{Provider: inner}
	f, err := core.New(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	before := f.Domains("tcp")
	lo, _ := f.Domain("tcp", "lo")
	create(t, lo, core.KindEQ, "kept")

	f.Rescan()
	if _, ok := f.Domain("tcp", "hot0"); ok {
		t.Fatal("hot0 before its interface came up")
	}
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	time.Sleep(core.RescanInterval) // the rescan above was the last one for that long
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); f.Rescan() }()
		go func() { defer wg.Done(); f.Domain("tcp", "hot0"); f.Infos() }()
	}
	wg.Wait()

	after := f.Domains("tcp")
	if len(after) != len(before)+1 || after[len(after)-1].Name != "hot0" {
		names := []string{}
		for _, d := range after {
			names = append(names, d.Name)
		}
		t.Fatalf("domains after the rescans: %v, want the %d before and hot0", names, len(before))
	}
	for i, d := range before {
		if after[i] != d {
			t.Errorf("domain %s was replaced", d.Name)
		}
	}
	if !present(lo, core.KindEQ, "kept") {
		t.Error("the eq of lo went with the rescan")
	}
	hot, _ := f.Domain("tcp", "hot0")
	create(t, hot, core.KindEQ, "new")
}

// TestRescanThrottled: rescans come at most once a RescanInterval, however
// often they are asked for (a user looping over a name that does not
// exist), and the next one after the interval looks again.
func TestRescanThrottled(t *testing.T) {
	inner, err := newTCP()
	if err != nil {
		t.Fatal(err)
	}
	g := &growing{Provider: inner}
	f, err := core.New(g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	scans := func() int { g.mu.Lock(); defer g.mu.Unlock(); return g.scans }
	start := time.Now()
	for i := 0; i < 100; i++ {
		f.Rescan()
	}
	if n := scans(); time.Since(start) < core.RescanInterval && n != 1 {
		t.Errorf("100 rescans asked for within %v looked at the interfaces %d times, want 1", time.Since(start), n)
	}
	time.Sleep(core.RescanInterval)
	before := scans()
	f.Rescan()
	if n := scans(); n != before+1 {
		t.Errorf("a rescan %v after the last looked %d times, want once", core.RescanInterval, n-before)
	}
}
