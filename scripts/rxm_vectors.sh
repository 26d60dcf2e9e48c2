#!/usr/bin/env bash
# Regenerates providers/rxm/wire/testdata/*.txt: real libfabric 1.17
# "tcp;ofi_rxm" traffic captured on loopback (fi_pingpong and
# scripts/rxm_probe.c), printed by scripts/rxm_capture.py.
#
# usage: scripts/rxm_vectors.sh [OUTDIR]   (root; tcpdump, gcc, libfabric-dev)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../providers/rxm/wire/testdata}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O1 -Wall -o "$tmp/rxm_probe" "$here/rxm_probe.c" -lfabric
version=$(dpkg-query -W -f='${Version}' libfabric1 2>/dev/null || echo unknown)

# pingpong NAME OOBPORT OPTIONS...
pingpong() {
	local name=$1 port=$2
	shift 2
	"$here/rxm_capture.sh" "$tmp/$name.pcap" "$port" "$@" >/dev/null 2>&1
	{
		echo "# FI_TCP_IFACE=lo ${FI_OFI_RXM_ENABLE_DYN_RBUF:+FI_OFI_RXM_ENABLE_DYN_RBUF=0 }fi_pingpong -p tcp -e rdm -d lo $* (server -B $port, client -P $port 127.0.0.1)"
		echo "# libfabric $version; scripts/rxm_vectors.sh"
		python3 "$here/rxm_capture.py" "$tmp/$name.pcap" "$port"
	} >"$out/$name.txt"
}

# probe NAME MODE PORTA PORTB [ENV_FOR_A] [START]
probe() {
	local name=$1 mode=$2 pa=$3 pb=$4 aenv=${5:-} start=${6:-}
	tcpdump -i lo -B 65536 -U -s 0 -w "$tmp/$name.pcap" "tcp port $pa or tcp port $pb" 2>/dev/null &
	local dump=$!
	sleep 1
	timeout 30 "$tmp/rxm_probe" "$mode" b "$pb" "$pa" ${start:+"$start"} 2>"$tmp/$name.b" &
	local b=$!
	sleep 0.5
	env ${aenv:+"$aenv"} timeout 30 "$tmp/rxm_probe" "$mode" a "$pa" "$pb" ${start:+"$start"} 2>"$tmp/$name.a" || true
	wait $b || true
	sleep 1
	kill $dump
	wait $dump 2>/dev/null || true
	{
		echo "# rxm_probe $mode: a on 127.0.0.1:$pa${aenv:+ ($aenv)}, b on 127.0.0.1:$pb"
		echo "# libfabric $version; scripts/rxm_vectors.sh; completions seen by a and b:"
		sed 's/^/#   a: /' "$tmp/$name.a"
		sed 's/^/#   b: /' "$tmp/$name.b"
		python3 "$here/rxm_capture.py" "$tmp/$name.pcap" "$pa,$pb"
	} >"$out/$name.txt"
}

mkdir -p "$out"
pingpong pingpong_1000 47811 -I 5 -S 1000
pingpong pingpong_tagged_1000 47812 -I 5 -S 1000 -m tagged
pingpong pingpong_10 47813 -I 2 -S 10
pingpong pingpong_tagged_10 47814 -I 2 -S 10 -m tagged
pingpong pingpong_100000 47815 -I 2 -S 100000
pingpong pingpong_tagged_20000 47816 -I 1 -S 20000 -m tagged
FI_OFI_RXM_ENABLE_DYN_RBUF=0 pingpong pingpong_sar_tagged_40000 47817 -I 1 -S 40000 -m tagged
probe probe_data data 47821 47822
probe probe_simul simul 47831 47832 "" $(( $(date +%s%3N) + 3000 ))
probe probe_reject one 47841 47842 FI_OFI_RXM_BUFFER_SIZE=8192
probe probe_transmit_complete one 47851 47852 RXM_PROBE_TRANSMIT_COMPLETE=1
