package fs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/tcp"
)

// sumProvider is the tcp provider whose domains take one atomic: a base
// FI_SUM of one FI_UINT64 on FI_EP_MSG endpoints (core.Atomics).
type sumProvider struct{ core.Provider }

type sumDomain struct{ core.ProviderDomain }

func (p sumProvider) OpenDomain(name string) (core.ProviderDomain, error) {
	d, err := p.Provider.OpenDomain(name)
	return sumDomain{d}, err
}

func (sumDomain) QueryAtomic(t fi.EPType, k core.OpKind, dt fi.AtomicType, op fi.AtomicOp) (uint64, uint64, error) {
	if t != fi.EP_MSG || k != core.OpAtomic || op != fi.SUM || dt != fi.UINT64 {
		return 0, 0, fi.EOPNOTSUPP
	}
	return 1, 8, nil
}

// TestQueryAtomicFile: a domain's query_atomic answers fi_query_atomic as
// getinfo answers fi_getinfo: read as opened, every operation the domain
// takes; a question written, its answer or its error (the errno of the
// write, and the sentence read after it). A domain without atomics lists
// none and answers -FI_ENOSYS, as libfabric's fi_no_query_atomic.
func TestQueryAtomicFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	mount := func(p core.Provider) string {
		fab, err := core.New(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fab.Close)
		mnt := filepath.Join(t.TempDir(), "fabric")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		srv, err := Mount(fab, mnt, Options{})
		if err != nil {
			t.Skipf("mount: %v", err)
		}
		t.Cleanup(func() { srv.Unmount() })
		return filepath.Join(mnt, "tcp", "lo", "query_atomic")
	}
	// ask writes q to a new open of file and returns the write's error
	// and what a read says then.
	ask := func(file, q string) (string, error) {
		f, err := os.OpenFile(file, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if q != "" {
			if _, err := f.WriteString(q); err != nil {
				b := make([]byte, 4096)
				n, _ := f.Read(b)
				return string(b[:n]), err
			}
		}
		b := make([]byte, 4096)
		n, err := f.Read(b)
		if err != nil && n == 0 && q == "" {
			return "", nil // an empty answer: end of file
		}
		return string(b[:n]), err
	}

	tp, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	file := mount(sumProvider{tp})
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o666 {
		t.Errorf("query_atomic: %v, %v; want mode 0666 (a query file, as getinfo)", st, err)
	}
	const line = "FI_EP_MSG atomic FI_SUM FI_UINT64 1 8\n"
	if got, err := ask(file, ""); got != line || err != nil {
		t.Errorf("query_atomic as opened: %q, %v; want %q", got, err, line)
	}
	if got, err := ask(file, "msg atomic sum uint64\n"); got != line || err != nil {
		t.Errorf("a supported question: %q, %v; want %q", got, err, line)
	}
	got, err := ask(file, "FI_EP_MSG fetch_atomic FI_SUM FI_UINT64")
	if !errors.Is(err, syscall.EOPNOTSUPP) || !strings.HasPrefix(got, "fi_query_atomic: ") {
		t.Errorf("an unsupported question: %q, %v; want EOPNOTSUPP and the sentence", got, err)
	}
	if _, err := ask(file, "FI_EP_MSG atomic FI_SUM"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("a question of 3 words: %v, want EINVAL", err)
	}

	tp2, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	plain := mount(tp2)
	if got, err := ask(plain, ""); got != "" || err != nil {
		t.Errorf("query_atomic of a domain without atomics: %q, %v; want nothing", got, err)
	}
	if _, err := ask(plain, "FI_EP_MSG atomic FI_SUM FI_UINT64"); !errors.Is(err, syscall.ENOSYS) {
		t.Errorf("a question to a domain without atomics: %v, want ENOSYS", err)
	}
}
