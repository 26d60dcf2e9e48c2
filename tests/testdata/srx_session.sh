#!/bin/sh
# A shared receive context driven with sh, cat and echo (fi_endpoint(3),
# "SHARED CONTEXTS"): two FI_EP_RDM endpoints a and b take their receives
# from srx s, each reporting them on its own receive CQ; x sends to both.
# A read of srx/s/data posts one receive on the context and prints the
# message, whichever endpoint got it. $FABRIC is the mount point. Exits
# non-zero on failure.
set -eu
D=$FABRIC/tcp/lo

fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect TEXT PATTERN WHAT
	case "$1" in *$2*) ;; *) fail "$3: want $2 in: $1" ;; esac
}

echo "== the domain offers shared contexts"
[ "$(cat $D/attr/max_ep_srx_ctx)" -gt 0 ] || fail "max_ep_srx_ctx $(cat $D/attr/max_ep_srx_ctx)"
[ "$(cat $D/attr/max_ep_stx_ctx)" -gt 0 ] || fail "max_ep_stx_ctx $(cat $D/attr/max_ep_stx_ctx)"

echo "== a and b bound to srx s and stx t, x alone"
mkdir $D/cq/tx $D/cq/ca $D/cq/cb $D/av/v $D/srx/s $D/stx/t $D/ep/a $D/ep/b $D/ep/x
echo 16 > $D/srx/s/attr/size
expect "$(cat $D/srx/s/status)" "srx s idle eps=0" "srx status"
for e in a b x; do
	echo FI_EP_RDM > $D/ep/$e/attr/type
	echo bind av v > $D/ep/$e/ctl
done
for e in a b; do
	echo bind cq tx send > $D/ep/$e/ctl
	echo bind cq c$e recv > $D/ep/$e/ctl
	echo bind srx s > $D/ep/$e/ctl
	echo bind stx t > $D/ep/$e/ctl
done
echo bind cq tx send,recv > $D/ep/x/ctl
[ "$(readlink $D/ep/a/srx)" = ../../srx/s ] || fail "ep/a/srx -> $(readlink $D/ep/a/srx)"
[ "$(readlink $D/ep/b/stx)" = ../../stx/t ] || fail "ep/b/stx -> $(readlink $D/ep/b/stx)"
[ "$(cat $D/ep/a/attr/rx_ctx_cnt)" = 18446744073709551615 ] || fail "rx_ctx_cnt $(cat $D/ep/a/attr/rx_ctx_cnt), want FI_SHARED_CONTEXT"
for e in a b x; do echo enable > $D/ep/$e/ctl; done
expect "$(cat $D/srx/s/status)" "srx s enabled eps=2" "srx status"
expect "$(cat $D/stx/t/status)" "stx t eps=2" "stx status"
if echo 32 > $D/srx/s/attr/size 2>/dev/null; then fail "srx size changed after enable"; fi

echo "== binds come before enable"
if echo bind srx s > $D/ep/x/ctl 2>/dev/null; then fail "bind srx after enable succeeded"; fi
expect "$(cat $D/ep/x/err)" "must come before enable" "ep x err"

echo "== a and b take no receives of their own"
if cat $D/ep/a/data >/dev/null 2>&1; then fail "a read of ep/a/data succeeded"; fi
expect "$(cat $D/ep/a/err)" "takes its receives from srx s" "ep a err"

echo "== a receive posted once takes whichever endpoint's message"
echo insert $(cat $D/ep/a/local) $(cat $D/ep/b/local) > $D/av/v/ctl
echo dest 1 > $D/ep/x/ctl
echo to-b > $D/ep/x/data
msg=$(cat $D/srx/s/data)
[ "$msg" = to-b ] || fail "srx s received '$msg'"
expect "$(cat $D/cq/cb/events)" "flags=FI_RECV|FI_MSG len=5" "b's receive CQ"
echo dest 0 > $D/ep/x/ctl
echo to-a > $D/ep/x/data
msg=$(cat $D/srx/s/data)
[ "$msg" = to-a ] || fail "srx s received '$msg'"
expect "$(cat $D/cq/ca/events)" "flags=FI_RECV|FI_MSG len=5" "a's receive CQ"

echo "== a message before any receive waits in the context"
echo early > $D/ep/x/data
i=0
until expect "$(cat $D/srx/s/status)" "held=1" "srx status" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 500 ] || fail "srx status $(cat $D/srx/s/status), want held=1"
	sleep 0.01
done
msg=$(cat $D/srx/s/data)
[ "$msg" = early ] || fail "srx s received '$msg'"
expect "$(cat $D/srx/s/status)" "posted=0 held=0" "srx status"

echo "== closing: the contexts stay while bound"
if rmdir $D/srx/s 2>/dev/null; then fail "rmdir of a bound srx succeeded"; fi
if rmdir $D/stx/t 2>/dev/null; then fail "rmdir of a bound stx succeeded"; fi
rmdir $D/ep/a $D/ep/b
rmdir $D/srx/s $D/stx/t
rmdir $D/ep/x $D/av/v $D/cq/tx $D/cq/ca $D/cq/cb
echo "== done"
