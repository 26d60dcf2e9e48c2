package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRelayShapes runs scripts/relay.c, the floor scripts/bench.sh
// measures fabricfs against, in every shape it has: each must move every
// message of a short ping-pong at a small and a large size and report a
// result that agrees with itself; bad options are refused.
func TestRelayShapes(t *testing.T) {
	needCmd(t, "gcc")
	bin := filepath.Join(t.TempDir(), "relay")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", bin, "../scripts/relay.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	shapes := [][]string{nil, {"-m", "split"}, {"-z"}, {"-m", "split", "-z"}, {"-p"}, {"-m", "split", "-p"}}
	const iters = 200
	for _, shape := range shapes {
		for _, size := range []int{64, 65536} {
			name := fmt.Sprintf("%s/%d", strings.Join(append([]string{"relay"}, shape...), " "), size)
			t.Run(name, func(t *testing.T) {
				if slices.Contains(shape, "-p") && runtime.NumCPU() < 2 {
					t.Skip("-p needs two CPUs")
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				args := append(append([]string{}, shape...), "-S", fmt.Sprint(size), "-I", fmt.Sprint(iters), "-w", "10")
				out, err := exec.CommandContext(ctx, bin, args...).Output()
				if err != nil {
					t.Fatalf("relay %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				var r struct {
					Bytes, Iters int
					Usec         float64 `json:"usec_per_xfer"`
					MBps         float64 `json:"mb_per_sec"`
				}
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatalf("relay printed %q: %v", out, err)
				}
				if r.Bytes != size || r.Iters != iters || r.Usec <= 0 {
					t.Fatalf("relay printed %q: want %d bytes, %d iterations and a positive time", out, size, iters)
				}
				// MB/s counts both directions over the whole run and
				// usec/xfer is half a round trip: one is size over the other.
				if want := float64(size) / r.Usec; math.Abs(r.MBps-want) > 0.02*want+0.01 {
					t.Fatalf("relay printed %q: %.2f MB/s, but %d B / %.2f us is %.2f", out, r.MBps, size, r.Usec, want)
				}
			})
		}
	}
	for _, bad := range [][]string{{"-S", "0"}, {"-S", "64", "-m", "bogus"}, {"-S", "64", "extra"}} {
		out, err := exec.Command(bin, bad...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "usage: relay") {
			t.Errorf("relay %s: %v, %q; want exit 2 and the usage", strings.Join(bad, " "), err, out)
		}
	}
}
