package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// freeTCPPort is a port of 127.0.0.1 nothing listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listenAs makes a passive endpoint of uid and has it listen on addr; it
// returns the endpoint's address or the error.
func listenAs(t *testing.T, d *core.Domain, uid uint32, addr string) (string, error) {
	t.Helper()
	eq, err := d.Create(core.KindEQ, "", uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eq.Release)
	pep, err := d.Create(core.KindPEP, "", uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pep.Release)
	if err := pep.Ctl(context.Background(), uid, "bind eq "+eq.ID); err != nil {
		t.Fatal(err)
	}
	if err := pep.Ctl(context.Background(), uid, "listen "+addr); err != nil {
		return "", err
	}
	a, err := pep.Impl.(*core.PEP).Name()
	if err != nil {
		t.Fatal(err)
	}
	return a.String(), nil
}

// A listener takes an address of its own domain: the unspecified address
// is the domain's of that family (never every address of the host), an
// address of another interface or host is refused with FI_EADDRNOTAVAIL.
func TestListenInDomain(t *testing.T) {
	d := lo(t)
	p := freeTCPPort(t)
	for _, tt := range []struct {
		addr, want string
		code       fi.Errno
	}{
		{fmt.Sprintf("0.0.0.0:%d", p), fmt.Sprintf("fi_sockaddr_in://127.0.0.1:%d", p), 0},
		{"[::]:0", "fi_sockaddr_in6://[::1]:", 0},
		{"127.0.0.2:0", "fi_sockaddr_in://127.0.0.2:", 0}, // lo has 127.0.0.0/8
		{"192.0.2.2:5000", "", fi.EADDRNOTAVAIL},
		{"10.1.2.3:5000", "", fi.EADDRNOTAVAIL},
		{"[fd00::2]:5000", "", fi.EADDRNOTAVAIL},
	} {
		got, err := listenAs(t, d, 1000, tt.addr)
		if tt.code != 0 {
			if !errors.Is(err, tt.code) {
				t.Errorf("listen %s = %q, %v; want %s", tt.addr, got, err, tt.code.Name())
			} else if !strings.Contains(err.Error(), "not an address of domain lo") {
				t.Errorf("listen %s: sentence %q", tt.addr, err)
			}
			continue
		}
		if err != nil || !strings.HasPrefix(got, tt.want) {
			t.Errorf("listen %s = %q, %v; want %s...", tt.addr, got, err, tt.want)
		}
	}
}

// A port below 1024 needs the privilege bind(2) needs: root may, another
// user (without CAP_NET_BIND_SERVICE: no caller process in ctx here) gets
// FI_EACCES with a sentence.
func TestListenPrivilegedPort(t *testing.T) {
	d := lo(t)
	_, err := listenAs(t, d, 1000, "127.0.0.1:81")
	wantCode(t, "uid 1000 listen 127.0.0.1:81", err, fi.EACCES)
	if err != nil && !strings.Contains(err.Error(), "port 81 is privileged") {
		t.Errorf("sentence %q", err)
	}
	_, err = listenAs(t, d, 1000, "0.0.0.0:443")
	wantCode(t, "uid 1000 listen 0.0.0.0:443", err, fi.EACCES)
	if core.MayBindPort(context.Background(), 1000) {
		t.Error("MayBindPort(uid 1000 without a caller) = true")
	}
	if !core.MayBindPort(context.Background(), 0) {
		t.Error("MayBindPort(root) = false")
	}
	// root may: the first free port below 1024 from 1023 down
	for port := 1023; port > 900; port-- {
		_, err := listenAs(t, d, 0, fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			return
		}
		if !errors.Is(err, fi.EADDRINUSE) {
			t.Fatalf("root listen 127.0.0.1:%d: %v", port, err)
		}
	}
	t.Error("root found no free port in 901..1023")
}

// MayBindPort reads the caller's capabilities for root too: a root
// process that dropped CAP_NET_BIND_SERVICE may not bind a privileged
// port, so the daemon does not do it for it; root with no caller process
// (the daemon's own listeners) may.
func TestMayBindPortRootWithoutCap(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--inh-caps=-net_bind_service", "--bounding-set=-net_bind_service", "sleep", "30"}, false},
		{[]string{"sleep", "30"}, true},
	} {
		cmd := exec.Command("setpriv", tt.args...)
		if err := cmd.Start(); err != nil {
			t.Skipf("setpriv: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		// setpriv execs sleep: wait until the process is sleep
		for i := 0; i < 100; i++ {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); strings.TrimSpace(string(b)) == "sleep" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		ctx := core.WithCaller(context.Background(), uint32(cmd.Process.Pid))
		if got := core.MayBindPort(ctx, 0); got != tt.want {
			t.Errorf("MayBindPort(root caller: setpriv %s) = %v, want %v", strings.Join(tt.args, " "), got, tt.want)
		}
	}
	// a caller that is gone: no process to hold the capability
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if core.MayBindPort(core.WithCaller(context.Background(), uint32(cmd.Process.Pid)), 1000) {
		t.Error("MayBindPort(uid 1000, a caller that exited) = true")
	}
}
