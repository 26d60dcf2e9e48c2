package tests

import "testing"

// TestProviderIOV runs provider/test/iovtest.c on FI_EP_RDM in the tree's
// tcp and verbs domains and against libfabric's own tcp;ofi_rxm on lo, as
// the target and as the initiator: fi_sendv and fi_sendmsg of 4 segments (registered: the
// ring's segment-array form; unregistered: staged) into fi_recvv and
// fi_recvmsg of 4, fi_writemsg of 4 local segments into 4 remote ones,
// fi_readmsg of 4 remote segments into 4 local ones, every byte and every
// gap between segments checked, and the calls' errors beyond
// rma_iov_limit.
func TestProviderIOV(t *testing.T) {
	runProviderC(t, "iovtest", []string{"tcp/lo"}, []string{"verbs/" + verbsDevice}, []string{"tcp/lo", "tcp-target"},
		[]string{"tcp/lo", "tcp-initiator"})
}
