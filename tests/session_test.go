package tests

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestShellSession runs testdata/session.sh: a full MSG session with only
// sh, cat, echo, mkdir and rmdir. Then the daemon stops and the mount must
// be gone.
func TestShellSession(t *testing.T) {
	d := mount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "testdata/session.sh")
	cmd.Env = append(os.Environ(), "FABRIC="+d.mnt)
	out, err := cmd.CombinedOutput()
	t.Logf("session.sh:\n%s", out)
	if err != nil {
		t.Fatalf("session.sh: %v", err)
	}
	d.stop(t)
	if isMounted(d.mnt) {
		t.Fatalf("%s is still mounted", d.mnt)
	}
}
