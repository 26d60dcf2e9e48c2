#!/bin/sh
# A whole MSG session driven with nothing but sh, cat, echo, mkdir and rmdir.
# $FABRIC is the mount point. Prints what it does; exits non-zero on failure.
set -eu
F=$FABRIC
D=$F/tcp/lo

fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect TEXT PATTERN WHAT
	case "$1" in *$2*) ;; *) fail "$3: want $2 in: $1" ;; esac
}

echo "== /info shows the tcp provider"
info=$(cat $F/info)
expect "$info" "prov_name: tcp" "/info"
expect "$info" "type: FI_EP_MSG" "/info"

echo "== /getinfo answers a query for tcp MSG"
exec 3<>$F/getinfo
echo "-p tcp -t FI_EP_MSG -d lo" >&3
answer=$(cat <&3)
exec 3<&-
case "$answer" in "---
fi_info:
    caps: "*) ;; *) fail "getinfo answer does not start like fi_info -v: $answer" ;; esac
expect "$answer" "name: lo" "getinfo"
expect "$answer" "type: FI_EP_MSG" "getinfo"

echo "== objects in domain lo"
mkdir $D/eq/ev $D/cq/c $D/pep/l $D/ep/a $D/cntr/sent $D/cntr/got
echo bind eq ev > $D/pep/l/ctl
echo listen 127.0.0.1:0 > $D/pep/l/ctl
local=$(cat $D/pep/l/local)
port=${local##*:}
[ -n "$port" ] && [ "$port" != 0 ] || fail "pep local is '$local'"
echo "listening on $local"

echo bind eq ev > $D/ep/a/ctl
echo bind cq c send,recv > $D/ep/a/ctl
echo bind cntr sent send > $D/ep/a/ctl
echo bind cntr got recv > $D/ep/a/ctl
echo enable > $D/ep/a/ctl
echo connect 127.0.0.1:$port hi > $D/ep/a/ctl

echo "== the listener accepts"
b=$(cat $D/pep/l/listen)
echo "request became ep $b"
echo bind eq ev > $D/ep/$b/ctl
echo bind cq c FI_SEND\|FI_RECV > $D/ep/$b/ctl
echo bind cntr sent FI_SEND > $D/ep/$b/ctl
echo bind cntr got FI_RECV > $D/ep/$b/ctl
echo enable > $D/ep/$b/ctl
echo accept welcome > $D/ep/$b/ctl

events=""
wait_event() { # wait_event PATTERN: read the EQ until PATTERN shows up
	while :; do
		case "$events" in *"$1"*) return 0 ;; esac
		events="$events
$(cat $D/eq/ev/events)"
	done
}
wait_event "connreq fid=pep/l ep=$b data=hi"
wait_event "connected fid=ep/a data=welcome"
wait_event "connected fid=ep/$b"
expect "$(cat $D/ep/a/status)" "connected" "ep a status"
expect "$(cat $D/ep/a/remote)" "127.0.0.1:$port" "ep a remote"

echo "== messages both ways"
echo hello > $D/ep/a/data
msg=$(cat $D/ep/$b/data)
[ "$msg" = hello ] || fail "ep $b received '$msg'"
echo world > $D/ep/$b/data
msg=$(cat $D/ep/a/data)
[ "$msg" = world ] || fail "ep a received '$msg'"
cq=$(cat $D/cq/c/events)
expect "$cq" "flags=FI_SEND|FI_MSG len=6" "cq"
expect "$cq" "flags=FI_RECV|FI_MSG len=6" "cq"

echo "== counters count the completions of the endpoints bound to them"
[ "$(cat $D/cntr/sent/value) $(cat $D/cntr/got/value)" = "2 2" ] || fail "counters sent, got: $(cat $D/cntr/sent/status), $(cat $D/cntr/got/status)"
expect "$(cat $D/ep/a/status)" "cntr=send:sent,recv:got" "ep a status"
[ "$(readlink $D/ep/a/cntr_send)" = ../../cntr/sent ] || fail "ep a cntr_send -> $(readlink $D/ep/a/cntr_send)"
(echo wait 3 10000 > $D/cntr/got/ctl) & waiter=$!
echo three > $D/ep/a/data
msg=$(cat $D/ep/$b/data)
[ "$msg" = three ] || fail "ep $b received '$msg'"
wait $waiter || fail "wait 3 on cntr got: $(cat $D/cntr/got/err)"
if echo bind cntr sent write > $D/ep/a/ctl 2>/dev/null; then fail "bind cntr after enable succeeded"; fi
expect "$(cat $D/ep/a/err)" "bind cntr sent write: endpoint is connected" "ep a err"

echo "== RMA into and out of mr/N/data"
mkdir $D/mr/ma $D/mr/mb
for m in ma mb; do echo 64 > $D/mr/$m/attr/len; done
echo FI_REMOTE_READ,FI_REMOTE_WRITE > $D/mr/mb/attr/access  # peers reach only what access allows
for m in ma mb; do echo reg > $D/mr/$m/ctl; done
key=$(cat $D/mr/mb/attr/key)
printf 'written by a' 1<> $D/mr/ma/data  # 1<>: a region's size is fixed, > would truncate
echo write ma 0 12 20 $key > $D/ep/a/ctl
# A tcp write completes once its bytes are in the local socket (docs/abi.md,
# "When a WRITE's bytes are in the target's region"): poll for them.
tries=0
until got=$(dd if=$D/mr/mb/data bs=1 skip=20 count=12 2>/dev/null); [ "$got" = "written by a" ]; do
	tries=$((tries + 1)); [ $tries -lt 100 ] || fail "mr mb holds '$got' 5 s after write"
	sleep 0.05
done
echo write ma 0 7 40 $key 0x2a > $D/ep/a/ctl
cq=""
until case "$cq" in *"flags=FI_REMOTE_WRITE|FI_REMOTE_CQ_DATA len=7 buf=0x0 data=0x2a"*) true ;; *) false ;; esac; do
	cq="$cq
$(cat $D/cq/c/events)" # the target's entry may come after the write returned
done
echo read ma 32 7 40 $key > $D/ep/a/ctl
got=$(dd if=$D/mr/ma/data bs=1 skip=32 count=7 2>/dev/null)
[ "$got" = "written" ] || fail "mr ma holds '$got' after read"
if echo write ma 60 8 0 $key > $D/ep/a/ctl 2>/dev/null; then fail "a write past the region succeeded"; fi
expect "$(cat $D/ep/a/err)" "write ma 60 8 0 $key: " "ep a err"

echo "== a bound cq or cntr cannot be removed"
if rmdir $D/cq/c 2>/dev/null; then fail "rmdir of a bound cq succeeded"; fi
if rmdir $D/cntr/sent 2>/dev/null; then fail "rmdir of a bound cntr succeeded"; fi

echo "== shutdown reaches the other side"
echo shutdown > $D/ep/a/ctl
wait_event "shutdown fid=ep/$b"

echo "== everything is removed"
rmdir $D/ep/a $D/ep/$b $D/pep/l $D/cq/c $D/eq/ev $D/cntr/sent $D/cntr/got $D/mr/ma $D/mr/mb
for k in ep pep cq eq cntr mr; do
	left=$(echo $D/$k/*)
	[ "$left" = "$D/$k/clone" ] || fail "left in $k: $left"
done
echo "== done"
