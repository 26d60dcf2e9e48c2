package tests

import (
	"errors"
	"strconv"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/clients/go/fabricfs"
)

// TestEndpointOptions checks attr/opt_* (fi_getopt) and ctl setopt
// (fi_setopt) against fi_endpoint(3) on each endpoint type the tree offers.
func TestEndpointOptions(t *testing.T) {
	d := mount(t)
	tr := d.tree(t)
	type want map[string]string // opt_NAME: the value read before any setopt
	cases := []struct {
		prov, dom, typ string
		opts           want
	}{
		// "FI_OPT_CM_DATA_SIZE ... This value limits the amount of data
		// that applications can exchange between peer endpoints using the
		// fi_connect, fi_accept, and fi_reject operations."
		{"tcp", "lo", "FI_EP_MSG", want{"cm_data_size": "256", "min_multi_recv": "-", "buffered_min": "-", "buffered_limit": "-"}},
		{"verbs", verbsDevice, "FI_EP_MSG", want{"cm_data_size": "55", "min_multi_recv": "-"}},
		// "fi_getopt() will return the currently configured threshold, or
		// the provider's default threshold if one has not be set by the
		// application."
		{"tcp", "lo", "FI_EP_RDM", want{"cm_data_size": "-", "min_multi_recv": "16384", "buffered_min": "0", "buffered_limit": "16384"}},
		{"verbs", verbsDevice, "FI_EP_RDM", want{"min_multi_recv": "16384", "buffered_limit": "16384"}},
		{"verbs", verbsDevice + "-dgram", "FI_EP_DGRAM", want{"cm_data_size": "-", "min_multi_recv": "-"}},
	}
	for _, c := range cases {
		t.Run(c.prov+"/"+c.dom+"/"+c.typ, func(t *testing.T) {
			ep, err := tr.Domain(c.prov, c.dom).NewEP()
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			if err := ep.SetAttr("type", c.typ); err != nil {
				t.Fatalf("type %s: %v (%s)", c.typ, err, ep.Err())
			}
			for name, v := range c.opts {
				if got, err := ep.Attr("opt_" + name); err != nil || got != v {
					t.Errorf("opt_%s = %q, %v; want %q", name, got, err, v)
				}
				if v == "-" {
					if err := ep.Ctl("setopt " + name + " 1"); !errors.Is(err, syscall.ENOPROTOOPT) {
						t.Errorf("setopt %s on an endpoint without it: %v, want ENOPROTOOPT", name, err)
					}
				}
			}
		})
	}

	t.Run("rules", func(t *testing.T) {
		ep, err := tr.Domain("tcp", "lo").NewEP()
		if err != nil {
			t.Fatal(err)
		}
		defer ep.Close()
		// "FI_OPT_CM_DATA_SIZE ... This option is read only."
		if err := ep.Ctl("setopt FI_OPT_CM_DATA_SIZE 10"); !errors.Is(err, syscall.ENOPROTOOPT) {
			t.Errorf("setopt cm_data_size: %v, want ENOPROTOOPT", err)
		}
		if err := ep.SetAttr("type", "FI_EP_RDM"); err != nil {
			t.Fatal(err)
		}
		// "Calling fi_setopt() with the threshold set to SIZE_MAX will set
		// the threshold to the maximum supported by the provider.
		// fi_getopt() can then be used to retrieve the set size."
		mustCtlObj(t, &ep.Object, "setopt buffered_min "+strconv.FormatUint(^uint64(0), 10))
		if got, _ := ep.Attr("opt_buffered_min"); got != "16384" {
			t.Errorf("buffered_min after SIZE_MAX = %q, want the provider's maximum 16384", got)
		}
		// "If the provider cannot support the requested threshold, it will
		// fail the fi_setopt() call with FI_EMSGSIZE."
		if err := ep.Ctl("setopt buffered_min 16385"); !errors.Is(err, syscall.EMSGSIZE) {
			t.Errorf("setopt buffered_min 16385: %v, want EMSGSIZE", err)
		}
		// A report shows at most an eager message's 16384 bytes.
		if err := ep.Ctl("setopt buffered_limit 16385"); !errors.Is(err, syscall.EMSGSIZE) {
			t.Errorf("setopt buffered_limit 16385: %v, want EMSGSIZE", err)
		}
		// The smallest buffered message reported cannot be larger than the
		// largest.
		if err := ep.Ctl("setopt buffered_limit 100"); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("setopt buffered_limit under buffered_min: %v, want EINVAL", err)
		}
		mustCtlObj(t, &ep.Object, "setopt min_multi_recv 64")
		if got, _ := ep.Attr("opt_min_multi_recv"); got != "64" {
			t.Errorf("min_multi_recv = %q after setopt 64", got)
		}
		av, err := tr.Domain("tcp", "lo").NewAV()
		if err != nil {
			t.Fatal(err)
		}
		defer av.Close()
		mustCtlObj(t, &ep.Object, "bind av "+av.ID())
		cq, err := tr.Domain("tcp", "lo").NewCQ(16)
		if err != nil {
			t.Fatal(err)
		}
		defer cq.Close()
		mustCtlObj(t, &ep.Object, "bind cq "+cq.ID()+" send|recv")
		mustCtlObj(t, &ep.Object, "enable")
		// "the threshold must be set prior to enabling the endpoint"
		if err := ep.Ctl("setopt buffered_limit 20000"); !errors.Is(err, syscall.EBADFD) {
			t.Errorf("setopt buffered_limit after enable: %v, want EBADFD (FI_EOPBADSTATE)", err)
		}
		// "Modifying this value is only guaranteed to set the minimum
		// buffer space needed on receives posted after the value has been
		// changed": min_multi_recv stays settable after enable.
		mustCtlObj(t, &ep.Object, "setopt min_multi_recv 128")
		if got, _ := ep.Attr("opt_min_multi_recv"); got != "128" {
			t.Errorf("min_multi_recv = %q after setopt 128 on the enabled endpoint", got)
		}
	})

	t.Run("pep", func(t *testing.T) {
		for _, c := range []struct{ prov, dom, want string }{{"tcp", "lo", "256"}, {"verbs", verbsDevice, "55"}} {
			p, err := tr.Domain(c.prov, c.dom).NewPEP()
			if err != nil {
				t.Fatal(err)
			}
			// "in the case of passive endpoints, in which the size reflects
			// the maximum size of the data that may be present as part of a
			// connection request event."
			if got, err := p.Attr("opt_cm_data_size"); err != nil || got != c.want {
				t.Errorf("%s/%s pep opt_cm_data_size = %q, %v; want %s", c.prov, c.dom, got, err, c.want)
			}
			p.Close()
		}
	})
}

// mustCtlObj writes cmd to o's ctl, failing the test with o's err.
func mustCtlObj(t *testing.T, o *fabricfs.Object, cmd string) {
	t.Helper()
	if err := o.Ctl(cmd); err != nil {
		t.Fatalf("%s: %v (%s)", cmd, err, o.Err())
	}
}
