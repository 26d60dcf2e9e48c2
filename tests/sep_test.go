package tests

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestScalableEndpointShellSession runs testdata/sep_session.sh: a
// scalable endpoint with 4 transmit and 4 receive contexts from the
// shell, over FI_EP_RDM, its receive contexts named by fi_rx_addr.
func TestScalableEndpointShellSession(t *testing.T) {
	d := mount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "testdata/sep_session.sh")
	cmd.Env = append(os.Environ(), "FABRIC="+d.mnt)
	out, err := cmd.CombinedOutput()
	t.Logf("sep_session.sh:\n%s", out)
	if err != nil {
		t.Fatalf("sep_session.sh: %v", err)
	}
}
