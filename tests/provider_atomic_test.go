package tests

import (
	"os/exec"
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
