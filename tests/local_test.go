package tests

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// The shm provider (providers/shm) through the mounted tree: FI_EP_RDM
// endpoints of one daemon named fi_shm://..., driven through the rings
// and from sh.

// TestLocalRings moves messages and RMA between two shm endpoints through
// their rings: a tagged message with remote CQ data reports its sender
// through the receiver's AV (FI_SOURCE); a message of 64 KiB sent before
// its receive is posted waits at the sender and lands whole once it is;
// a write and a read reach the peer's region by its key.
func TestLocalRings(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("shm", "shm")
	a, b := newRDMNode(t, dom), newRDMNode(t, dom)
	if !strings.HasPrefix(a.addr, fi.ShmScheme) {
		t.Fatalf("shm endpoint's local address %q, want fi_shm://NAME", a.addr)
	}
	bInA, aInB := a.insert(t, b), b.insert(t, a)

	copy(a.mr.Mem(), "tagged message")
	b.post(t, ring.WR{Op: ring.OpTRecv, Context: 1, Offset: 0, Len: 64, Tag: 0x1200, Ignore: 0xff, Addr: anyAddr})
	b.taken(t)
	a.post(t, ring.WR{Op: ring.OpTSend, Flags: uint64(fi.REMOTE_CQ_DATA), Context: 2, Len: 14, Addr: bInA, Tag: 0x1234, Data: 77})
	e := b.recvDone(t)
	if got := string(b.mr.Mem()[e.Buf:][:e.Len]); e.Err != 0 || e.Context != 1 || got != "tagged message" || e.Tag != 0x1234 ||
		e.Data != 77 || e.Flags&uint64(fi.REMOTE_CQ_DATA) == 0 || e.SrcAddr != aInB {
		t.Fatalf("receive: %+v %q", e, got)
	}
	if e := a.next(t); e.Context != 2 || e.Err != 0 {
		t.Fatalf("send: %+v", e)
	}

	const big = 64 << 10
	for k := range big {
		a.mr.Mem()[k] = byte(k * 7)
	}
	a.post(t, ring.WR{Op: ring.OpSend, Context: 3, Len: big, Addr: bInA})
	b.post(t, ring.WR{Op: ring.OpRecv, Context: 4, Offset: 0, Len: big, Addr: anyAddr})
	if e := b.recvDone(t); e.Context != 4 || e.Err != 0 || e.Len != big || !bytes.Equal(b.mr.Mem()[:big], a.mr.Mem()[:big]) {
		t.Fatalf("receive of %d bytes: %+v", big, e)
	}
	if e := a.next(t); e.Context != 3 || e.Err != 0 {
		t.Fatalf("send of %d bytes: %+v", big, e)
	}

	// RMA into and out of b's region, registered with remote access.
	mr, err := dom.NewMR(1<<16, "FI_READ,FI_WRITE,FI_REMOTE_READ,FI_REMOTE_WRITE")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	ks, err := mr.Attr("key")
	if err != nil {
		t.Fatal(err)
	}
	key, err := strconv.ParseUint(strings.TrimSpace(ks), 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	copy(a.mr.Mem()[100:], "rma write")
	a.post(t, ring.WR{Op: ring.OpWrite, Context: 5, Offset: 100, Len: 9, Addr: bInA, RMAAddr: 10, RMAKey: key})
	if e := a.next(t); e.Context != 5 || e.Err != 0 || string(mr.Mem()[10:19]) != "rma write" {
		t.Fatalf("write: %+v, region %q", e, mr.Mem()[10:19])
	}
	copy(mr.Mem()[1000:], "rma read")
	a.post(t, ring.WR{Op: ring.OpRead, Context: 6, Offset: 200, Len: 8, Addr: bInA, RMAAddr: 1000, RMAKey: key})
	if e := a.next(t); e.Context != 6 || e.Err != 0 || string(a.mr.Mem()[200:208]) != "rma read" {
		t.Fatalf("read: %+v %q", e, a.mr.Mem()[200:208])
	}
	a.post(t, ring.WR{Op: ring.OpWrite, Context: 7, Offset: 100, Len: 9, Addr: bInA, RMAAddr: 10, RMAKey: key + 1})
	if e := a.next(t); e.Context != 7 || e.Err == 0 {
		t.Fatalf("write with a key b does not have: %+v, want an error", e)
	}
}

// TestLocalUsers: as over loopback TCP, where any user's socket reaches
// any listener, an endpoint of one user takes messages from another's;
// but a peer's RMA reaches only the target endpoint owner's memory,
// whatever key it names: root's write to nobody's endpoint with the key of
// root's own region fails and moves nothing.
func TestLocalUsers(t *testing.T) {
	d := mount(t)
	openUp(t, d.mnt)
	D := d.path("shm", "shm")
	out, err := shell(`
set -eu
mkdir $D/cq/c $D/av/v $D/ep/r $D/mr/m
echo FI_EP_RDM > $D/ep/r/attr/type
echo bind cq c send,recv > $D/ep/r/ctl
echo bind av v > $D/ep/r/ctl
echo enable > $D/ep/r/ctl
echo 4096 > $D/mr/m/attr/len
echo FI_WRITE,FI_REMOTE_WRITE > $D/mr/m/attr/access
echo reg > $D/mr/m/ctl
printf 'XXXXYYYY' 1<> $D/mr/m/data
cat $D/ep/r/local`, "D="+D)
	if err != nil {
		t.Fatalf("root's endpoint: %v\n%s", err, out)
	}
	out, err = asUser(nobody, `
set -eu
mkdir $D/cq/nc $D/av/nv $D/ep/n
echo FI_EP_RDM > $D/ep/n/attr/type
echo bind cq nc send,recv > $D/ep/n/ctl
echo bind av nv > $D/ep/n/ctl
echo enable > $D/ep/n/ctl
echo insert $A > $D/av/nv/ctl
echo dest 0 > $D/ep/n/ctl
echo from nobody > $D/ep/n/data
cat $D/ep/n/local`, "D="+D, "A="+strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if msg := d.read(t, "shm", "shm", "ep", "r", "data"); msg != "from nobody\n" {
		t.Errorf("root's endpoint received %q, want nobody's message", msg)
	}
	out, err = shell(`
set -eu
echo insert $N > $D/av/v/ctl
echo dest 0 > $D/ep/r/ctl
if echo write m 4 4 0 $(cat $D/mr/m/attr/key) > $D/ep/r/ctl 2>/dev/null; then echo "write with root's key into nobody's endpoint succeeded"; exit 1; fi
cat $D/ep/r/err`, "D="+D, "N="+strings.TrimSpace(out))
	if err != nil || !strings.Contains(out, "write: Invalid argument") { // FI_EINVAL: no such key for the target
		t.Fatalf("root's write to nobody's endpoint: %v\n%s", err, out)
	}
	if mem := d.read(t, "shm", "shm", "mr", "m", "data"); !strings.HasPrefix(mem, "XXXXYYYY") {
		t.Errorf("root's region is %q after the refused write, want XXXXYYYY...", mem[:8])
	}
}

// TestLocalNames: `setname` before enable names an shm endpoint
// (fi_cm(3): "The fi_setname call may be used to modify or assign the
// address of the local endpoint."), fi_ns://NODE:SERVICE as fi_getinfo
// makes it with FI_SOURCE, or fi_shm://NAME; a peer that inserts the
// string reaches it; a second endpoint with the name fails to enable
// (EADDRINUSE) while the first lives, and the tree's own names
// (fi_shm://fabricfs.N) are not for the taking (EADDRNOTAVAIL).
func TestLocalNames(t *testing.T) {
	d := mount(t)
	D := d.path("shm", "shm")
	out, err := shell(`
set -eu
mkdir $D/cq/c $D/av/v $D/ep/s $D/ep/c $D/ep/twin $D/ep/thief
for e in s c twin thief; do
	echo FI_EP_RDM > $D/ep/$e/attr/type
	echo bind cq c send,recv > $D/ep/$e/ctl
	echo bind av v > $D/ep/$e/ctl
done
echo setname fi_ns://127.0.0.1:9228 > $D/ep/s/ctl
echo enable > $D/ep/s/ctl
echo enable > $D/ep/c/ctl
echo insert fi_ns://127.0.0.1:9228 > $D/av/v/ctl
echo dest 0 > $D/ep/c/ctl
echo hello > $D/ep/c/data
echo setname fi_ns://127.0.0.1:9228 > $D/ep/twin/ctl
echo setname fi_shm://fabricfs.1 > $D/ep/thief/ctl
cat $D/ep/s/local`, "D="+D)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if name := strings.TrimSpace(out); name != "fi_ns://127.0.0.1:9228" {
		t.Errorf("the named endpoint's local address is %q", name)
	}
	if msg := d.read(t, "shm", "shm", "ep", "s", "data"); msg != "hello\n" {
		t.Errorf("the named endpoint received %q, want hello", msg)
	}
	if err := ctl(filepath.Join(D, "ep", "twin", "ctl"), "enable"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("enable of a second endpoint named fi_ns://127.0.0.1:9228: %v, want EADDRINUSE", err)
	}
	if err := ctl(filepath.Join(D, "ep", "thief", "ctl"), "enable"); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("enable of an endpoint named fi_shm://fabricfs.1: %v, want EADDRNOTAVAIL", err)
	}
}

// TestLocalOps: fi_open_ops (fi_domain(3): "fi_open_ops is used to open
// provider specific interfaces.") names no set of the shm domain or its
// endpoints: their ops directories list nothing, as shm has neither a
// socket nor a device whose options a set would give.
func TestLocalOps(t *testing.T) {
	d := mount(t)
	dom := d.tree(t).Domain("shm", "shm")
	checkOps(t, filepath.Join(dom.Dir, "ops"))
	a := newRDMNode(t, dom)
	checkOps(t, filepath.Join(a.ep.Dir, "ops"))
}
