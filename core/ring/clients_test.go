package ring

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fabricfs/fabricfs/core/fi"
)

// The clients under clients/ carry their own copies of the layout: the C
// header clients/c/fabricfs.h and the Python module
// clients/python/fabricfs.py. These tests check every constant, field
// offset and field size of both against this package (and core/fi for
// libfabric's values), so that neither can drift from the daemon.

var (
	cHeader  = filepath.Join("..", "..", "clients", "c", "fabricfs.h")
	pyModule = filepath.Join("..", "..", "clients", "python")
)

// abiConstants are the values every constant of the ABI must have, under
// the C header's names; the Python module has each without "FABRICFS_".
func abiConstants() map[string]uint64 {
	return map[string]uint64{
		"FABRICFS_ABI_VERSION":       Version,
		"FABRICFS_RING_MAGIC":        Magic,
		"FABRICFS_RING_WORK":         uint64(TypeWork),
		"FABRICFS_RING_COMPLETION":   uint64(TypeCompletion),
		"FABRICFS_ENTRY_SIZE":        EntrySize,
		"FABRICFS_HEADER_SIZE":       HeaderSize,
		"FABRICFS_MAX_ENTRIES":       MaxEntries,
		"FABRICFS_HEAD_OFF":          HeadOff,
		"FABRICFS_TAIL_OFF":          TailOff,
		"FABRICFS_FLAGS_OFF":         FlagsOff,
		"FABRICFS_WAKE_OFF":          WakeOff,
		"FABRICFS_RING_NEED_WAKEUP":  uint64(NeedWakeup),
		"FABRICFS_RING_OVERFLOW":     uint64(Overflow),
		"FABRICFS_RING_DEAD":         uint64(Dead),
		"FABRICFS_FEAT_FUTEX":        FeatFutex,
		"FABRICFS_FEAT_WAIT_FILE":    FeatWaitFile,
		"FABRICFS_FEAT_IOV":          FeatIOV,
		"FABRICFS_IOV_LIMIT":         IOVLimit,
		"FABRICFS_SEG_SIZE":          SegSize,
		"FABRICFS_OP_SEND":           uint64(OpSend),
		"FABRICFS_OP_RECV":           uint64(OpRecv),
		"FABRICFS_OP_TSEND":          uint64(OpTSend),
		"FABRICFS_OP_TRECV":          uint64(OpTRecv),
		"FABRICFS_OP_WRITE":          uint64(OpWrite),
		"FABRICFS_OP_READ":           uint64(OpRead),
		"FABRICFS_OP_ATOMIC":         uint64(OpAtomic),
		"FABRICFS_OP_FETCH_ATOMIC":   uint64(OpFetchAtomic),
		"FABRICFS_OP_COMPARE_ATOMIC": uint64(OpCompareAtomic),
		"FI_MSG":                     uint64(fi.MSG),
		"FI_RMA":                     uint64(fi.RMA),
		"FI_TAGGED":                  uint64(fi.TAGGED),
		"FI_ATOMIC":                  uint64(fi.ATOMIC),
		"FI_READ":                    uint64(fi.READ),
		"FI_WRITE":                   uint64(fi.WRITE),
		"FI_RECV":                    uint64(fi.RECV),
		"FI_SEND":                    uint64(fi.SEND),
		"FI_REMOTE_READ":             uint64(fi.REMOTE_READ),
		"FI_REMOTE_WRITE":            uint64(fi.REMOTE_WRITE),
		"FI_MULTI_RECV":              uint64(fi.MULTI_RECV),
		"FI_REMOTE_CQ_DATA":          uint64(fi.REMOTE_CQ_DATA),
		"FI_COMPLETION":              uint64(fi.COMPLETION),
		"FI_INJECT":                  uint64(fi.INJECT),
		"FI_TRANSMIT_COMPLETE":       uint64(fi.TRANSMIT_COMPLETE),
		"FI_DELIVERY_COMPLETE":       uint64(fi.DELIVERY_COMPLETE),
		"FI_ADDR_UNSPEC":             fi.ADDR_UNSPEC,
		"FI_ADDR_NOTAVAIL":           fi.ADDR_NOTAVAIL,
		"FI_EIO":                     uint64(fi.EIO),
		"FI_EACCES":                  uint64(fi.EACCES),
		"FI_EINVAL":                  uint64(fi.EINVAL),
		"FI_ENOSYS":                  uint64(fi.ENOSYS),
		"FI_EMSGSIZE":                uint64(fi.EMSGSIZE),
		"FI_EOPNOTSUPP":              uint64(fi.EOPNOTSUPP),
		"FI_ENOTCONN":                uint64(fi.ENOTCONN),
		"FI_ECANCELED":               uint64(fi.ECANCELED),
		"FI_ETRUNC":                  uint64(fi.ETRUNC),
		"FI_ENOAV":                   uint64(fi.ENOAV),
		"FI_EOVERRUN":                uint64(fi.EOVERRUN),
	}
}

// abiField is a field's byte offset and size in its struct.
type abiField struct{ Off, Size int }

// abiStructs are the offsets and sizes of every field of the header, the
// work request and the completion, under the header's struct and field
// names (docs/abi.md's), from this package's offsets.
func abiStructs() map[string]map[string]abiField {
	return map[string]map[string]abiField{
		"fabricfs_ring_header": {
			"magic": {offMagic, 4}, "abi_version": {offVersion, 2}, "ring_type": {offType, 2},
			"entry_size": {offEntrySize, 4}, "entry_count": {offCount, 4}, "mask": {offMask, 4},
			"head_off": {offHeadOff, 4}, "tail_off": {offTailOff, 4}, "flags_off": {offFlagsOff, 4},
			"wake_off": {offWakeOff, 4}, "entries_off": {offEntriesOff, 4}, "features": {offFeatures, 8},
			"reserved": {offReserved, fixedHeader - offReserved},
		},
		"fabricfs_wr": {
			"op": {wrOp, 1}, "iov_count": {wrIOVCount, 1}, "rma_iov_count": {wrRMAIOVCount, 1},
			"reserved1": {wrReserved1, wrFlags - wrReserved1}, "flags": {wrFlags, 8},
			"context": {wrContext, 8}, "desc": {wrDesc, 8}, "offset": {wrOffset, 8}, "len": {wrLen, 8},
			"addr": {wrAddr, 8}, "data": {wrData, 8}, "tag": {wrTag, 8}, "ignore": {wrIgnore, 8},
			"rma_addr": {wrRMAAddr, 8}, "rma_key": {wrRMAKey, 8}, "result_desc": {wrResultDesc, 8},
			"result_offset": {wrResultOffset, 8}, "compare_offset": {wrCompareOffset, 8},
			"datatype": {wrDatatype, 1}, "atomic_op": {wrAtomicOp, 1},
			"reserved2": {wrReserved2, EntrySize - wrReserved2},
		},
		"fabricfs_cqe": {
			"op_context": {cqContext, 8}, "flags": {cqFlags, 8}, "len": {cqLen, 8}, "buf": {cqBuf, 8},
			"data": {cqData, 8}, "tag": {cqTag, 8}, "src_addr": {cqSrcAddr, 8}, "err": {cqErr, 4},
			"prov_errno": {cqProvErrno, 4}, "olen": {cqOLen, 8}, "desc": {cqDesc, 8},
			"err_data": {cqErrData, ErrDataSize}, "reserved": {cqReserved, EntrySize - cqReserved},
		},
		"fabricfs_iov":     {"desc": {segDesc, 8}, "offset": {segOffset, 8}, "len": {segLen, 8}},
		"fabricfs_rma_iov": {"addr": {rmaSegAddr, 8}, "len": {rmaSegLen, 8}, "key": {rmaSegKey, 8}},
	}
}

// abiSizes are the sizes of the three structs.
var abiSizes = map[string]int{"fabricfs_ring_header": fixedHeader, "fabricfs_wr": EntrySize, "fabricfs_cqe": EntrySize,
	"fabricfs_iov": SegSize, "fabricfs_rma_iov": SegSize}

// TestABITables checks the tables above against themselves: each
// struct's fields tile it, without gap or overlap, from 0 to its size, so
// that a field missing from a table (or from core/ring) shows.
func TestABITables(t *testing.T) {
	for s, fields := range abiStructs() {
		fs := sortedFields(fields)
		at := 0
		for _, f := range fs {
			if fields[f].Off != at {
				t.Errorf("%s.%s at %d, want %d (the end of the field before)", s, f, fields[f].Off, at)
			}
			at = fields[f].Off + fields[f].Size
		}
		if at != abiSizes[s] {
			t.Errorf("%s: fields end at %d, want %d", s, at, abiSizes[s])
		}
	}
}

func sortedFields(fields map[string]abiField) []string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return fields[names[i]].Off < fields[names[j]].Off })
	return names
}

var (
	defineRe = regexp.MustCompile(`(?m)^#define[ \t]+((?:FABRICFS|FI)_[A-Z0-9_]+)[ \t]+\S`)
	structRe = regexp.MustCompile(`(?ms)^struct (fabricfs_(?:ring_header|wr|cqe|iov|rma_iov)) \{\n(.*?)^\};`)
	memberRe = regexp.MustCompile(`^\s*(?:u?int(?:8|16|32|64)_t)\s+([a-z0-9_]+)(?:\[\d+\])?;\s*$`)
)

// parseHeader finds the constants (#define FABRICFS_* and FI_*, except
// the include guard) and the members of the three ABI structs of the
// header text.
func parseHeader(t *testing.T, text string) (defines []string, members map[string][]string) {
	t.Helper()
	for _, m := range defineRe.FindAllStringSubmatch(text, -1) {
		defines = append(defines, m[1])
	}
	members = map[string][]string{}
	for _, m := range structRe.FindAllStringSubmatch(text, -1) {
		for _, line := range strings.Split(strings.TrimSpace(m[2]), "\n") {
			mm := memberRe.FindStringSubmatch(line)
			if mm == nil {
				t.Fatalf("%s: struct %s: cannot read member line %q (one fixed-width integer member per line)", cHeader, m[1], line)
			}
			members[m[1]] = append(members[m[1]], mm[1])
		}
	}
	return defines, members
}

// probeC compiles and runs a program that includes the header and prints
// "NAME VALUE" for each constant, "struct.member OFFSET SIZE" for each
// member, "sizeof struct SIZE" for each struct, and the kernel's futex
// constants the Python module copies ("kernel NAME VALUE").
func probeC(t *testing.T, header string, defines []string, members map[string][]string) probed {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#include %q\n#include <stdio.h>\nint main(void)\n{\n", header)
	for _, d := range defines {
		fmt.Fprintf(&b, "\tprintf(\"%s %%llu\\n\", (unsigned long long)(%s));\n", d, d)
	}
	for s, ms := range members {
		fmt.Fprintf(&b, "\tprintf(\"sizeof %s %%zu\\n\", sizeof(struct %s));\n", s, s)
		for _, m := range ms {
			fmt.Fprintf(&b, "\tprintf(\"%s.%s %%zu %%zu\\n\", offsetof(struct %s, %s), sizeof(((struct %s *)0)->%s));\n", s, m, s, m, s, m)
		}
	}
	for _, k := range kernelConstants {
		fmt.Fprintf(&b, "\tprintf(\"kernel %s %%llu\\n\", (unsigned long long)(%s));\n", k, k)
	}
	b.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "probe.c"), filepath.Join(dir, "probe")
	if err := os.WriteFile(src, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", header, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	got := probed{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		key, vals := f[0], f[1:]
		if key == "sizeof" || key == "kernel" {
			key, vals = key+" "+f[1], f[2:]
		}
		for _, v := range vals {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("probe line %q: %v", line, err)
			}
			got[key] = append(got[key], n)
		}
	}
	return got
}

// probed is what the probe printed: the values after each key.
type probed map[string][]uint64

// at is the i-th value printed for key, or ^0 if there is none.
func (p probed) at(key string, i int) uint64 {
	if v := p[key]; i < len(v) {
		return v[i]
	}
	return ^uint64(0)
}

// kernelConstants are the futex values the Python module copies from the
// kernel's headers (the C header takes them from <linux/futex.h>).
var kernelConstants = []string{"SYS_futex", "FUTEX_WAIT", "FUTEX_WAKE", "FUTEX_WAKE_OP",
	"FUTEX_OP_ADD", "FUTEX_OP_OR", "FUTEX_OP_ANDN", "FUTEX_OP_CMP_EQ"}

// TestCHeader checks every constant and every field offset and size of
// clients/c/fabricfs.h against this package: the header may have no
// constant or field the tables do not know, and must have all they do.
func TestCHeader(t *testing.T) {
	checkCHeader(t, cHeader)
}

func checkCHeader(t *testing.T, header string) {
	text, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(header)
	if err != nil {
		t.Fatal(err)
	}
	defines, members := parseHeader(t, string(text))
	got := probeC(t, abs, defines, members)

	want := abiConstants()
	for _, d := range defines {
		w, ok := want[d]
		switch {
		case !ok:
			t.Errorf("%s defines %s, which the test does not know: add it to abiConstants", header, d)
		case got.at(d, 0) != w:
			t.Errorf("%s: %s = %#x, core/ring says %#x", header, d, got.at(d, 0), w)
		}
		delete(want, d)
	}
	for d := range want {
		t.Errorf("%s does not define %s", header, d)
	}

	structs := abiStructs()
	for s, fields := range structs {
		if _, ok := members[s]; !ok {
			t.Errorf("%s has no struct %s", header, s)
			continue
		}
		if n := got.at("sizeof "+s, 0); n != uint64(abiSizes[s]) {
			t.Errorf("%s: sizeof(struct %s) = %d, core/ring says %d", header, s, n, abiSizes[s])
		}
		seen := map[string]bool{}
		for _, m := range members[s] {
			seen[m] = true
			f, ok := fields[m]
			if !ok {
				t.Errorf("%s: struct %s has a member %s that core/ring does not", header, s, m)
				continue
			}
			if off, size := got.at(s+"."+m, 0), got.at(s+"."+m, 1); off != uint64(f.Off) || size != uint64(f.Size) {
				t.Errorf("%s: %s.%s at offset %d, %d bytes; core/ring says offset %d, %d bytes", header, s, m, off, size, f.Off, f.Size)
			}
		}
		for m := range fields {
			if !seen[m] {
				t.Errorf("%s: struct %s has no member %s", header, s, m)
			}
		}
	}
	// core/ring's own futex operations are the kernel's.
	for k, v := range map[string]uint64{"FUTEX_WAIT": futexWait, "FUTEX_WAKE": futexWake, "SYS_futex": unix.SYS_FUTEX} {
		if g := got.at("kernel "+k, 0); g != v {
			t.Errorf("the kernel's %s is %d, core/ring's %d", k, g, v)
		}
	}
}

// pyProbe is run by python3 in clients/python: it prints the module's
// integer constants and the layouts of its three structs as JSON.
const pyProbe = `
import json, fabricfs as f
print(json.dumps({
    "consts": {k: v for k, v in vars(f).items() if k[:1].isupper() and type(v) is int},
    "sizes": {"fabricfs_ring_header": f.HEADER.size, "fabricfs_wr": f.WR.size, "fabricfs_cqe": f.CQE.size,
              "fabricfs_iov": f.IOV.size, "fabricfs_rma_iov": f.RMA_IOV.size},
    "structs": {
        "fabricfs_ring_header": f.layout(f.HEADER, f.HEADER_FIELDS),
        "fabricfs_wr": f.layout(f.WR, f.WR_FIELDS),
        "fabricfs_cqe": f.layout(f.CQE, f.CQE_FIELDS),
        "fabricfs_iov": f.layout(f.IOV, f.IOV_FIELDS),
        "fabricfs_rma_iov": f.layout(f.RMA_IOV, f.RMA_IOV_FIELDS),
    },
}))
`

// TestPythonModule checks every integer constant of
// clients/python/fabricfs.py and the offset and size of every field of its
// struct formats against this package; the futex constants it copies from
// the kernel are checked against the kernel's headers, through gcc.
func TestPythonModule(t *testing.T) {
	checkPythonModule(t, pyModule)
}

func checkPythonModule(t *testing.T, dir string) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	cmd := exec.Command("python3", "-c", pyProbe)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	var py struct {
		Consts  map[string]uint64
		Sizes   map[string]int
		Structs map[string]map[string][2]int
	}
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatalf("python3 printed %q: %v", out, err)
	}
	want := map[string]uint64{}
	for name, v := range abiConstants() {
		want[strings.TrimPrefix(name, "FABRICFS_")] = v
	}
	text, err := os.ReadFile(cHeader)
	if err != nil {
		t.Fatal(err)
	}
	defines, members := parseHeader(t, string(text))
	kernel := probeC(t, mustAbs(t, cHeader), defines, members)
	for _, k := range kernelConstants {
		want[k] = kernel.at("kernel "+k, 0)
	}
	for name, v := range py.Consts {
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("fabricfs.py: %s = %d, which the test does not know: add it to abiConstants", name, v)
		case v != w:
			t.Errorf("fabricfs.py: %s = %#x, core/ring says %#x", name, v, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("fabricfs.py has no constant %s", name)
	}
	for s, fields := range abiStructs() {
		if py.Sizes[s] != abiSizes[s] {
			t.Errorf("fabricfs.py: %s is %d bytes, core/ring says %d", s, py.Sizes[s], abiSizes[s])
		}
		for name, f := range fields {
			g, ok := py.Structs[s][name]
			if !ok {
				if !strings.HasPrefix(name, "reserved") || name == "reserved" && s == "fabricfs_ring_header" {
					t.Errorf("fabricfs.py: %s has no field %s", s, name)
				}
				continue
			}
			if g != [2]int{f.Off, f.Size} {
				t.Errorf("fabricfs.py: %s.%s at offset %d, %d bytes; core/ring says offset %d, %d bytes", s, name, g[0], g[1], f.Off, f.Size)
			}
		}
		for name := range py.Structs[s] {
			if _, ok := fields[name]; !ok {
				t.Errorf("fabricfs.py: %s has a field %s that core/ring does not", s, name)
			}
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
