#!/bin/sh
# FI_EP_RDM driven with nothing but sh, cat and echo: two endpoints, an AV
# each, messages through the data files (ctl "dest FIADDR" says where
# writes go; "tag", "cqdata", "src" and "rxbuf" make them tagged, with
# remote CQ data, from one sender, of a fixed receive size). $FABRIC is
# the mount point. Exits non-zero on failure.
set -eu
D=$FABRIC/tcp/lo

fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect TEXT PATTERN WHAT
	case "$1" in *$2*) ;; *) fail "$3: want $2 in: $1" ;; esac
}

echo "== /info offers tcp;ofi_rxm"
expect "$(cat $D/info)" "prov_name: tcp;ofi_rxm" "lo info"

echo "== two RDM endpoints"
mkdir $D/cq/c $D/av/va $D/av/vb $D/ep/a $D/ep/b
for e in a b; do
	echo FI_EP_RDM > $D/ep/$e/attr/type
	[ "$(cat $D/ep/$e/attr/type)" = FI_EP_RDM ] || fail "ep $e type $(cat $D/ep/$e/attr/type)"
	expect "$(cat $D/ep/$e/attr/protocol)" FI_PROTO_RXM "ep $e protocol"
	echo bind cq c send,recv > $D/ep/$e/ctl
done
if echo enable > $D/ep/a/ctl 2>/dev/null; then fail "enable without an av succeeded"; fi
expect "$(cat $D/ep/a/err)" "no av bound" "ep a err"
echo bind av va > $D/ep/a/ctl
echo bind av vb > $D/ep/b/ctl
# A default of FI_MULTI_RECV does not apply to data-file reads: each still
# takes one message into a buffer of its own.
echo FI_MULTI_RECV > $D/ep/b/attr/rx_op_flags
expect "$(cat $D/ep/b/attr/rx_op_flags)" "FI_MULTI_RECV" "ep b rx_op_flags"
echo enable > $D/ep/a/ctl
echo enable > $D/ep/b/ctl
if echo FI_EP_MSG > $D/ep/a/attr/type 2>/dev/null; then fail "type changed after enable"; fi
A=$(cat $D/ep/a/local)
B=$(cat $D/ep/b/local)
echo "a is $A, b is $B"
expect "$(cat $D/ep/a/status)" "rdm enabled" "ep a status"

echo "== no connections of their own"
if echo connect $B > $D/ep/a/ctl 2>/dev/null; then fail "connect on an RDM endpoint succeeded"; fi
expect "$(cat $D/ep/a/err)" "FI_EP_MSG" "ep a err"
if echo x > $D/ep/a/data 2>/dev/null; then fail "data write without dest succeeded"; fi
expect "$(cat $D/ep/a/err)" "dest FIADDR" "ep a err"

echo "== each inserts the other and sends to it"
echo insert $B > $D/av/va/ctl
echo insert $A > $D/av/vb/ctl
expect "$(cat $D/av/va/addrs)" "0 $B" "av va"
echo dest 0 > $D/ep/a/ctl
echo dest 0 > $D/ep/b/ctl
expect "$(cat $D/ep/a/status)" "remote=fi_addr:0" "ep a status"
echo hello > $D/ep/a/data
msg=$(cat $D/ep/b/data)
[ "$msg" = hello ] || fail "ep b received '$msg'"
echo world > $D/ep/b/data
msg=$(cat $D/ep/a/data)
[ "$msg" = world ] || fail "ep a received '$msg'"
cq=$(cat $D/cq/c/events)
expect "$cq" "flags=FI_SEND|FI_MSG len=6" "cq"
expect "$cq" "flags=FI_RECV|FI_MSG len=6 buf=0x0 data=0x0 tag=0x0 src=0" "cq (FI_SOURCE through the av)"

echo "== a tagged message with remote CQ data, taken from a only"
echo tag 0x1234 > $D/ep/a/ctl
echo cqdata 0xfeed > $D/ep/a/ctl
expect "$(cat $D/ep/a/status)" "remote=fi_addr:0 tag=0x1234/0x0 cqdata=0xfeed" "ep a status"
echo tagged > $D/ep/a/data
echo tag 0x1200 0xff > $D/ep/b/ctl
echo src 0 > $D/ep/b/ctl
if echo src 7 > $D/ep/b/ctl 2>/dev/null; then fail "src of an fi_addr not in the av succeeded"; fi
expect "$(cat $D/ep/b/err)" "src 7: " "ep b err"
msg=$(cat $D/ep/b/data)
[ "$msg" = tagged ] || fail "ep b received '$msg'"
cq=$(cat $D/cq/c/events)
expect "$cq" "flags=FI_SEND|FI_TAGGED len=7" "cq"
expect "$cq" "len=7 buf=0x0 data=0xfeed tag=0x1234 src=0" "cq (tag and data)"
for c in "tag off" "cqdata off"; do echo $c > $D/ep/a/ctl; done
for c in "tag off" "src any"; do echo $c > $D/ep/b/ctl; done
expect "$(cat $D/ep/a/status)" "remote=fi_addr:0" "ep a status"
case "$(cat $D/ep/a/status)" in *tag=*|*cqdata=*) fail "ep a status after off: $(cat $D/ep/a/status)" ;; esac

echo "== a receive of 4 bytes truncates a longer message"
echo rxbuf 4 > $D/ep/b/ctl
echo truncated > $D/ep/a/data
if msg=$(cat $D/ep/b/data 2>/dev/null); then fail "the truncated read succeeded"; fi
[ "$msg" = trun ] || fail "ep b read '$msg' of a truncated message"
expect "$(cat $D/ep/b/err)" "truncated to rxbuf 4" "ep b err"
expect "$(cat $D/cq/c/events)" "len=4 buf=0x0 data=0x0 tag=0x0 src=0 err=FI_ETRUNC prov_errno=0 olen=6" "cq"
echo rxbuf off > $D/ep/b/ctl
echo whole > $D/ep/a/data
msg=$(cat $D/ep/b/data)
[ "$msg" = whole ] || fail "ep b received '$msg'"
cat $D/cq/c/events > /dev/null

echo "== everything is removed"
rmdir $D/ep/a $D/ep/b $D/av/va $D/av/vb $D/cq/c
echo "== done"
