package tests

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The provider's atomics (fi_atomic(3), provider/atomic.c): the calls and
// fi_query_atomic over a tree directory of the test's own making, and
// every operation the tree's domains take between two processes, of the
// provider or one of them libfabric's tcp.

// TestProviderAtomicCalls runs provider/test/atomic_test.c, atomic.c alone
// with ep.c stood in for: fi_query_atomic and the valid calls answer from
// the domain's query_atomic file, and each atomic call posts the
// operation fi_atomic(3) describes or refuses it before posting.
func TestProviderAtomicCalls(t *testing.T) {
	bin := buildProviderTest(t, t.TempDir(), "atomic")
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || string(out) != "ok atomic\n" {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
}

// TestProviderAtomic runs provider/test/atomictest.c on FI_EP_RDM in the
// tree's tcp and verbs domains and on verbs' FI_EP_MSG: a target process
// and an initiator process, every operation and datatype fi_query_atomic
// allows with registered, unregistered and mixed buffers (results and
// target values checked against the program's own arithmetic),
// fi_inject_atomic, the counters, the calls' errors and a bad key's error
// completion. And against libfabric's own tcp;ofi_rxm on lo, as the
// target and as the initiator: the operations and the bad key.
func TestProviderAtomic(t *testing.T) {
	runProviderC(t, "atomictest", []string{"tcp/lo", "rdm"}, []string{"verbs/" + verbsDevice, "rdm"},
		[]string{"verbs/" + verbsDevice, "msg"}, []string{"tcp/lo", "rdm", "tcp-target"},
		[]string{"tcp/lo", "rdm", "tcp-initiator"})
}

// TestProviderAtomicTwoDaemons runs atomictest between two daemons, as two
// hosts of one RoCE fabric (devices on 127.0.0.2 and 127.0.0.3): the
// initiator's tree is one, the target's the other, on verbs FI_EP_RDM
// (rxm's protocol: every pair rxm takes) and FI_EP_MSG (the RC atomics).
func TestProviderAtomicTwoDaemons(t *testing.T) {
	port := strconv.Itoa(freeUDPPort(t))
	d1 := mountWith(t, "-verbs-addrs", "127.0.0.2", "-roce-port", port)
	d2 := mountWith(t, "-verbs-addrs", "127.0.0.3", "-roce-port", port)
	bin := buildProviderC(t, "atomictest")
	for _, typ := range []string{"rdm", "msg"} {
		t.Run(typ, func(t *testing.T) {
			env := append(provEnv(t, d1), "ATOMICTEST_TARGET_ROOT="+d2.mnt, "ATOMICTEST_TARGET_DOMAIN=verbs/rxe_127_0_0_3")
			p := startProc(t, env, bin, "verbs/rxe_127_0_0_2", typ)
			if code := p.wait(t, ppLimit); code != 0 || !strings.HasSuffix(p.out.String(), "PASS\n") {
				t.Fatalf("%v", p)
			}
			t.Logf("%s", p.out.String())
		})
	}
}
