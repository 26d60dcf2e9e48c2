#!/usr/bin/env bash
# Scale: what one fabricfs daemon costs with many enabled endpoints and
# many RDM peers (docs/bench.md, "Scale").
#
#   scripts/scale.sh [-s] [-o FILE] [-- scale flags...]
#
# Builds bin/fabricfs and scripts/scale, mounts a daemon of its own (with
# one verbs device on 127.0.0.1) under a new temporary directory, runs
# scale against it, prints its table and the issue's targets ("targets,
# scale: ..." lines) and writes its JSON to FILE (default scale.json in the
# current directory). Without -s: 10,000 tcp FI_EP_MSG endpoints whose tx
# and rx rings scale maps, as the C provider does, spread over the tcp
# domains lo and eth0 (a tcp domain takes 8192, its ep_cnt), then 10,000
# AV entries, 10 s of idle per step. -s is the short run (500 FI_EP_MSG and
# 500 FI_EP_RDM endpoints made from the shell, 2,000 mapped, 2 s idle), too
# small to judge the targets. Flags after -- go to scale (-msg N, -rdm N,
# -verbs N, -mapped N, -peers N, -idle D). Run it as root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

short=0 out=scale.json
while getopts so: o; do
	case $o in
	s) short=1 ;;
	o) out=$OPTARG ;;
	*) sed -n 2,16p "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
args=(-domains lo,eth0 -msg 0 -rdm 0 -mapped 10000 -peers 10000 -idle 10s)
[ $short = 1 ] && args=(-msg 500 -rdm 500 -mapped 2000 -peers 10000 -idle 2s)

go build -o bin/fabricfs ./cmd/fabricfs
go build -o bin/scale ./scripts/scale
work=$(mktemp -d /tmp/ffs-scale.XXXXXX)
mnt=$work/fabric
mkdir "$mnt"
port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
bin/fabricfs -verbs-addrs 127.0.0.1 -roce-port "$port" "$mnt" 2>"$work/log" &
pid=$!
cleanup() {
	fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 200); do
	grep -q "mounted on $mnt" "$work/log" && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/log" >&2; exit 1; }
	sleep 0.1
done
grep -q "mounted on $mnt" "$work/log" || { echo "fabricfs did not mount $mnt" >&2; exit 1; }
bin/scale -mnt "$mnt" -pid "$pid" "${args[@]}" -json "$out" "$@"
echo "JSON in $out"
