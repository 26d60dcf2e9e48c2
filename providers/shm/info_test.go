package shm

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

// TestShmInfoMatchesFiInfo compares the entry with the first one
// `fi_info -v -p shm` prints (libfabric 1.17's shm, the anchor of the
// provider), line by line: every attribute is libfabric's but those the
// tree gives on purpose, each with its reason below.
func TestShmInfoMatchesFiInfo(t *testing.T) {
	out, err := exec.Command("fi_info", "-v", "-p", "shm").Output()
	if err != nil {
		t.Skipf("fi_info (libfabric-bin) not usable: %v", err)
	}
	theirs := strings.Split(strings.TrimSpace(string(out)), "\n")
	if i := slices.Index(theirs[1:], "---"); i >= 0 {
		theirs = theirs[:i+1] // the first entry; the second is FI_HMEM's
	}
	var b strings.Builder
	if err := fi.WriteInfos(&b, New().Infos()); err != nil {
		t.Fatal(err)
	}
	ours := strings.Split(strings.TrimSpace(b.String()), "\n")
	// Lines that differ on purpose, by key and section.
	differ := map[string]string{
		// Names: libfabric's shm names an entry after its process
		// (fi_shm://PID) and gives it as dest_addr too.
		"src_addrlen": "names", "dest_addrlen": "names", "src_addr": "names", "dest_addr": "names",
		// FI_FENCE (every operation is placed in order), FI_SHARED_AV
		// (core's named AVs), FI_LOCAL_COMM said, FI_MULTI_RECV in
		// tx caps' list as libfabric prints the entry's.
		"caps": "capabilities",
		// Without hints libfabric's shm takes its fast-RMA path
		// (smr_fast_rma_enabled), which narrows the transmit order to
		// FI_ORDER_SAS and the order sizes to 0; every operation of the
		// tree's is placed in the order it is posted.
		"msg_order": "orders", "max_order_raw_size": "orders", "max_order_war_size": "orders", "max_order_waw_size": "orders",
		// Two senders copying at once into two receives of one
		// endpoint may complete them out of their posting order.
		"comp_order": "orders",
		// The daemon progresses operations (FI_PROGRESS_AUTO).
		"data_progress": "progress",
		// Regions are the daemon's, addressed by offset (FI_MR_BASIC
		// is libfabric's shm's before its fast-RMA path).
		"mr_mode": "regions",
		// Endpoints are the daemon's, not one process's peers
		// (SMR_MAX_PEERS), each with its contexts. (Shared contexts
		// and counters are core's, which adds them to every entry it
		// offers; the provider's own say 0, as libfabric's shm.)
		"ep_cnt": "core", "tx_ctx_cnt": "core", "rx_ctx_cnt": "core",
		// A region is one piece of the daemon's memory (mr/N/data).
		"mr_iov_limit": "regions",
	}
	// What some of those lines say here, wherever they appear.
	want := map[string]string{
		"mr_mode":            "[  ]",
		"data_progress":      "FI_PROGRESS_AUTO",
		"comp_order":         "[ FI_ORDER_NONE ]",
		"ep_cnt":             "8192",
		"max_order_raw_size": "18446744073709551615",
	}
	if len(theirs) != len(ours) {
		t.Fatalf("fi_info prints %d lines, we %d:\n%s", len(theirs), len(ours), b.String())
	}
	for i := range theirs {
		key, _, _ := strings.Cut(strings.TrimSpace(theirs[i]), ":")
		if theirs[i] != ours[i] && differ[key] == "" {
			t.Errorf("line %d: fi_info %q, we %q", i+1, theirs[i], ours[i])
		}
		if w, ok := want[key]; ok && strings.TrimSpace(ours[i]) != key+": "+w {
			t.Errorf("line %d: we %q, want %s: %s", i+1, ours[i], key, w)
		}
	}
}
