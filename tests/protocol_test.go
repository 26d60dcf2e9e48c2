package tests

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestGetinfoProtocolHint: a query by protocol, ep_attr.protocol in the
// hints block of /getinfo. fi_endpoint(3): "FI_PROTO_UNSPEC: The protocol
// is not specified. This is usually provided as input, with other
// attributes of the socket or provider selecting the actual protocol."
// FI_PROTO_UNSPEC answers every entry of the domain; FI_PROTO_RXM only the
// FI_EP_RDM ones, FI_PROTO_SOCK_TCP only the FI_EP_MSG ones; a protocol
// no entry speaks finds nothing (ENODATA).
func TestGetinfoProtocolHint(t *testing.T) {
	d := mount(t)
	block := func(proto string) string {
		return "-p tcp -d lo\nfi_info:\n    fi_ep_attr:\n        protocol: " + proto + "\n"
	}
	all, err := ask(t, d, "-p tcp -d lo")
	if err != nil {
		t.Fatalf("-p tcp -d lo: %v", err)
	}
	unspec, err := ask(t, d, block("FI_PROTO_UNSPEC"))
	if err != nil || len(entries(unspec)) != len(entries(all)) {
		t.Errorf("protocol FI_PROTO_UNSPEC: %d entries, %v; without a protocol %d", len(entries(unspec)), err, len(entries(all)))
	}
	for proto, typ := range map[string]string{"FI_PROTO_RXM": "FI_EP_RDM", "FI_PROTO_SOCK_TCP": "FI_EP_MSG"} {
		out, err := ask(t, d, block(proto))
		if err != nil || len(entries(out)) == 0 {
			t.Errorf("protocol %s: %v\n%s", proto, err, out)
			continue
		}
		for _, e := range entries(out) {
			if !strings.Contains(e, "        protocol: "+proto+"\n") || !strings.Contains(e, "        type: "+typ+"\n") {
				t.Errorf("protocol %s gave an entry that is not %s over it:\n%s", proto, typ, e)
			}
		}
	}
	if out, err := ask(t, d, block("FI_PROTO_UDP")); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("protocol FI_PROTO_UDP: %v, want ENODATA\n%s", err, out)
	}
}
