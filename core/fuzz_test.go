package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
)

// FuzzCtl feeds arbitrary control messages to one object of every kind.
// No EQ or CQ exists in the domain, so no endpoint can be enabled and no
// input can make the daemon dial out; everything else runs for real. The
// daemon must never panic, and a failed command must say why, with a
// libfabric code.
func FuzzCtl(f *testing.F) {
	for _, s := range []string{
		"bind cq 0 send", "bind cntr fuzz send,recv", "bind cntr fuzz write|FI_REMOTE_READ", "bind eq x", "enable", "connect 127.0.0.1:1 'hi'", "accept hex:00",
		"reject x", "shutdown", "cancel 0x10", "setopt min_multi_recv 10", "listen 127.0.0.1:0",
		"signal", "insert 127.0.0.1:1 [::1]:2", "remove 0 1", "reg", "add 1", "set 0x5",
		"adderr 2", "seterr 3", "wait 0 1", "wait 99 0",
		"tag 0x1234 0xff", "tag off", "src 0", "src any", "cqdata 0xfeed", "cqdata off", "rxbuf 10", "rxbuf off", "rxbuf 0",
		"write fuzz 0 8 0 0x1234", "write fuzz 0 8 16 1 0xfeed", "read fuzz 0 8 0 1", "write fuzz 0xffffffffffffffff 2 0 1", "read 99 0 1 0 1", "bind 'x", "", "\n", "a\x00b",
	} {
		f.Add(s)
	}
	d := lo(f)
	var objs []*core.Object
	for _, k := range []core.Kind{core.KindEP, core.KindPEP, core.KindAV, core.KindMR, core.KindCntr} {
		o, err := d.Create(k, "fuzz", 0)
		if err != nil {
			f.Fatal(err)
		}
		objs = append(objs, o)
	}
	f.Fuzz(func(t *testing.T, line string) {
		// A wait without a timeout blocks until the caller is interrupted.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		for _, o := range objs {
			if err := o.Ctl(ctx, 0, line); err != nil && (err.Error() == "" || core.Code(err) == fi.EOTHER) {
				t.Fatalf("%s: %q failed (%v) without a sentence or a code", o, line, err)
			}
			o.Status()
		}
	})
}
