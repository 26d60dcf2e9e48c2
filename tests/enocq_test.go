package tests

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestEnableWithoutCQ: fi_endpoint(3) "-FI_ENOCQ: The endpoint has not
// been configured with necessary event queue." An endpoint whose caps send
// and receive messages is not enabled until a CQ is bound for each
// direction: `enable` fails with EBADFD (FI_ENOCQ's errno in the tree) and
// err names the direction whose CQ is missing; once both are bound,
// enable succeeds.
func TestEnableWithoutCQ(t *testing.T) {
	d := mount(t)
	dom := []string{"tcp", "lo"}
	for _, p := range [][]string{{"eq", "e"}, {"cq", "c"}, {"ep", "x"}, {"ep", "y"}} {
		if err := os.Mkdir(d.path(append(dom, p...)...), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		ep, bind, missing string
	}{
		{"x", "send", "recv"},
		{"y", "recv", "send"},
	} {
		ctlPath := d.path(append(dom, "ep", c.ep, "ctl")...)
		d.mustCtl(t, "bind eq e", append(dom, "ep", c.ep, "ctl")...)
		d.mustCtl(t, "bind cq c "+c.bind, append(dom, "ep", c.ep, "ctl")...)
		if !wantErrno(t, "enable of ep/"+c.ep+" with a cq for "+c.bind+" only", ctl(ctlPath, "enable"), syscall.EBADFD) {
			continue
		}
		msg := checkSentence(t, d, append(dom, "ep", c.ep), "enable")
		if !strings.Contains(msg, "no cq bound for "+c.missing) {
			t.Errorf("ep/%s: err %q does not say the cq for %s is missing", c.ep, msg, c.missing)
		}
		if st := d.read(t, append(dom, "ep", c.ep, "status")...); !strings.Contains(st, "idle") {
			t.Errorf("ep/%s after the failed enable: status %q, want idle", c.ep, st)
		}
		d.mustCtl(t, "bind cq c "+c.missing, append(dom, "ep", c.ep, "ctl")...)
		d.mustCtl(t, "enable", append(dom, "ep", c.ep, "ctl")...)
	}
}
