package tests

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestSharedContextShellSession runs testdata/srx_session.sh: shared
// receive and transmit contexts from the shell, over FI_EP_RDM endpoints.
func TestSharedContextShellSession(t *testing.T) {
	d := mount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "testdata/srx_session.sh")
	cmd.Env = append(os.Environ(), "FABRIC="+d.mnt)
	out, err := cmd.CombinedOutput()
	t.Logf("srx_session.sh:\n%s", out)
	if err != nil {
		t.Fatalf("srx_session.sh: %v", err)
	}
}
