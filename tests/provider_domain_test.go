package tests

import "testing"

// TestProviderDomain runs provider/test/domaintest.c in the tree's tcp and
// verbs domains: FI_AV_USER_ID ("User identifiers are returned with
// completion data in place of the AV address", fi_getinfo(3)) offered on
// FI_EP_RDM, inserted with fi_av_insert and reported as a message's
// source; fi_close of a domain with each kind of object open ("All
// objects associated with the opened domain must be released prior to
// calling fi_close, otherwise the call will return -FI_EBUSY",
// fi_domain(3)) and after; fi_domain_attr.domain on fi_getinfo's input
// (an opened instance restricts the output to its domain) and output (the
// first opened instance of each entry's domain, else NULL).
func TestProviderDomain(t *testing.T) {
	runProviderC(t, "domaintest", []string{"tcp/lo"}, []string{"verbs/" + verbsDevice})
}
