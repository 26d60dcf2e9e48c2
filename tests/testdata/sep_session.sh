#!/bin/sh
# A scalable endpoint driven with sh, cat and echo (fi_endpoint(3),
# "SCALABLE ENDPOINTS"): ep s is scalable with 4 transmit and 4 receive
# contexts, ep tx0..tx3 and rx0..rx3, each bound to a CQ of its own. Its av
# has rx_ctx_bits 2, so fi_addr 0 with a receive context's index in its
# top 2 bits (fi_rx_addr) names that context of s: transmit context i
# sends to receive context 3-i, and each receive context reads the message
# sent to it. $FABRIC is the mount point. Exits non-zero on failure.
set -eu
D=$FABRIC/tcp/lo

fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect TEXT PATTERN WHAT
	case "$1" in *$2*) ;; *) fail "$3: want $2 in: $1" ;; esac
}
# rx_addr J: fi_rx_addr(0, J, 2), in decimal.
rx_addr() {
	case $1 in 0) echo 0 ;; 1) echo 4611686018427387904 ;; 2) echo 9223372036854775808 ;; 3) echo 13835058055282163712 ;; esac
}

echo "== scalable endpoint s, its av v with rx_ctx_bits 2"
mkdir $D/av/v $D/ep/s
echo 2 > $D/av/v/attr/rx_ctx_bits
echo FI_EP_RDM > $D/ep/s/attr/type
if echo 4 > $D/ep/s/attr/tx_ctx_cnt 2>/dev/null; then fail "tx_ctx_cnt 4 on an endpoint not scalable"; fi
echo true > $D/ep/s/attr/scalable
echo 4 > $D/ep/s/attr/tx_ctx_cnt
echo 4 > $D/ep/s/attr/rx_ctx_cnt
echo bind av v > $D/ep/s/ctl

echo "== its contexts, each with its own CQ"
for i in 0 1 2 3; do
	for dir in tx rx; do
		mkdir $D/cq/c$dir$i $D/ep/$dir$i
		echo context s $dir $i > $D/ep/$dir$i/ctl
		[ "$(cat $D/ep/$dir$i/attr/context)" = "$dir $i" ] || fail "ep/$dir$i/attr/context $(cat $D/ep/$dir$i/attr/context)"
	done
	echo bind cq ctx$i send > $D/ep/tx$i/ctl
	echo bind cq crx$i recv > $D/ep/rx$i/ctl
done
[ "$(readlink $D/ep/tx0/sep)" = ../../ep/s ] || fail "ep/tx0/sep -> $(readlink $D/ep/tx0/sep)"
mkdir $D/ep/x
if echo context s tx 4 > $D/ep/x/ctl 2>/dev/null; then fail "transmit context 4 of 4 made"; fi
if echo context s rx 0 > $D/ep/x/ctl 2>/dev/null; then fail "receive context 0 made twice"; fi
rmdir $D/ep/x
echo enable > $D/ep/s/ctl
for i in 0 1 2 3; do
	echo enable > $D/ep/tx$i/ctl
	echo enable > $D/ep/rx$i/ctl
done
echo insert $(cat $D/ep/s/local) > $D/av/v/ctl
[ "$(cat $D/ep/tx2/local)" = "$(cat $D/ep/s/local)" ] || fail "a context's address is not its scalable endpoint's"

echo "== the scalable endpoint moves no data itself, a transmit context receives nothing"
echo dest 0 > $D/ep/s/ctl
if echo x > $D/ep/s/data 2>/dev/null; then fail "a write of ep/s/data succeeded"; fi
expect "$(cat $D/ep/s/err)" "post to its contexts" "ep s err"
if cat $D/ep/tx0/data >/dev/null 2>&1; then fail "a transmit context received"; fi
expect "$(cat $D/ep/tx0/err)" "it takes transmit operations only" "ep tx0 err"

echo "== transmit context i to receive context 3-i, by fi_rx_addr"
for i in 0 1 2 3; do
	echo dest $(rx_addr $((3 - i))) > $D/ep/tx$i/ctl
	echo from-$i > $D/ep/tx$i/data
	expect "$(cat $D/cq/ctx$i/events)" "flags=FI_SEND|FI_MSG len=7" "tx$i's CQ"
done
for j in 0 1 2 3; do
	msg=$(cat $D/ep/rx$j/data)
	[ "$msg" = from-$((3 - j)) ] || fail "receive context $j got '$msg', want from-$((3 - j))"
	expect "$(cat $D/cq/crx$j/events)" "flags=FI_RECV|FI_MSG len=7" "rx$j's CQ"
done

echo "== closing: the scalable endpoint stays while it has contexts"
if rmdir $D/ep/s 2>/dev/null; then fail "rmdir of a scalable endpoint with contexts succeeded"; fi
for i in 0 1 2 3; do rmdir $D/ep/tx$i $D/ep/rx$i $D/cq/ctx$i $D/cq/crx$i; done
rmdir $D/ep/s $D/av/v
echo "== done"
