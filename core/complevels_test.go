package core_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/ring"
)

// TestInjectComplete: fi_endpoint(3) FI_INJECT_COMPLETE: "Indicates that a
// completion should be generated when the source buffer(s) may be
// reused." fi_cq(3): "A completion guarantees that the buffers will not
// be read from again and the application may reclaim them." Each send
// with FI_INJECT_COMPLETE has its source overwritten the moment its
// completion is reaped, before the peer posts the receive; the peer
// still gets the bytes the send was posted with.
func TestInjectComplete(t *testing.T) {
	_, mem, _, tx, brx, cqr, post := msgRig(t)
	flags := uint64(fi.INJECT_COMPLETE | fi.COMPLETION)
	for i := 0; i < 20; i++ {
		msg := []byte(fmt.Sprintf("original %02d", i))
		copy(mem, msg)
		post(tx, ring.WR{Op: ring.OpSend, Context: uint64(100 + i), Offset: 0, Len: uint64(len(msg)), Flags: flags})
		c := reapCQEs(t, cqr, nil, 1, "the send with FI_INJECT_COMPLETE")[0]
		if c.Err != 0 || c.Context != uint64(100+i) {
			t.Fatalf("send %d: completion %+v", i, c)
		}
		copy(mem, bytes.Repeat([]byte{'X'}, len(msg))) // reused at once
		post(brx, ring.WR{Op: ring.OpRecv, Context: uint64(200 + i), Offset: 1024, Len: 64, Flags: uint64(fi.COMPLETION)})
		c = reapCQEs(t, cqr, nil, 1, "the receive")[0]
		if c.Err != 0 || c.Context != uint64(200+i) || c.Len != uint64(len(msg)) {
			t.Fatalf("receive %d: completion %+v", i, c)
		}
		if got := mem[1024 : 1024+len(msg)]; !bytes.Equal(got, msg) {
			t.Fatalf("send %d: the peer got %q, want %q: the buffer was read after its inject completion", i, got, msg)
		}
	}
}

// TestCommitComplete: fi_endpoint(3) FI_COMMIT_COMPLETE: "Indicates that a
// completion should not be generated (locally or at the peer) until the
// result of an operation have been made persistent." Without persistent
// memory (no FI_RMA_PMEM) the tree serves it as delivery complete, the
// level below it (fi_cq(3) FI_DELIVERY_COMPLETE: "A completion guarantees
// that the result of the operation is available"): a send with it stays
// in flight until the peer places the message, and a write's completion
// comes once the target holds its bytes.
func TestCommitComplete(t *testing.T) {
	_, mem, key, tx, brx, cqr, post := msgRig(t)
	commit := uint64(fi.COMMIT_COMPLETE | fi.COMPLETION)
	copy(mem, "commit!!")
	post(tx, ring.WR{Op: ring.OpSend, Context: 1, Offset: 0, Len: 8, Flags: commit})
	time.Sleep(200 * time.Millisecond)
	if head, tail := cqr.Peek(); head != tail {
		t.Fatal("a send with FI_COMMIT_COMPLETE completed before the peer placed it")
	}
	post(brx, ring.WR{Op: ring.OpRecv, Context: 2, Offset: 1024, Len: 64, Flags: uint64(fi.COMPLETION)})
	for _, c := range reapCQEs(t, cqr, nil, 2, "the send and its receive") {
		if c.Err != 0 {
			t.Fatalf("completion %+v", c)
		}
	}
	if !bytes.Equal(mem[1024:1032], []byte("commit!!")) {
		t.Fatalf("the peer got %q", mem[1024:1032])
	}
	for i := 0; i < 20; i++ {
		copy(mem[100:], []byte{byte(i), 'c', 'o', 'm', 'm', 'i', 't', '!'})
		post(tx, ring.WR{Op: ring.OpWrite, Context: uint64(10 + i), Offset: 100, Len: 8, RMAAddr: 200, RMAKey: key, Flags: commit})
		c := reapCQEs(t, cqr, nil, 1, "the write with FI_COMMIT_COMPLETE")[0]
		if c.Err != 0 || c.Context != uint64(10+i) {
			t.Fatalf("completion %+v", c)
		}
		if !bytes.Equal(mem[200:208], mem[100:108]) {
			t.Fatalf("write %d completed with FI_COMMIT_COMPLETE before the target held its bytes (%q)", i, mem[200:208])
		}
	}
}
