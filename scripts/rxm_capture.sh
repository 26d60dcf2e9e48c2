#!/usr/bin/env bash
# Captures real libfabric 1.17 "tcp;ofi_rxm" traffic on loopback, for the
# test vectors in providers/rxm/wire/testdata.
#
# usage: scripts/rxm_capture.sh OUT.pcap OOBPORT [fi_pingpong options...]
# OOBPORT must be in 47800-47899: only ports 47800-47999 are captured, and
# the rxm endpoints listen in 47900-47999 (FI_TCP_PORT_*_RANGE), so that
# other traffic on lo neither fills the capture nor makes it drop packets.
# e.g.   scripts/rxm_capture.sh /tmp/eager.pcap 47811 -I 5 -S 1000
#        scripts/rxm_capture.sh /tmp/tagged.pcap 47812 -I 5 -S 1000 -m tagged
#        scripts/rxm_capture.sh /tmp/rndv.pcap 47813 -I 2 -S 100000
# then   scripts/rxm_capture.py OUT.pcap OOBPORT
#
# Needs root (tcpdump on lo), tcpdump and libfabric-bin (scripts/deps.sh).
set -euo pipefail
out=$1 port=$2
shift 2
tcpdump -i lo -B 65536 -U -s 0 -w "$out" tcp portrange 47800-47999 2>/dev/null &
dump=$!
trap 'kill $dump 2>/dev/null || true' EXIT
sleep 1
export FI_TCP_IFACE=lo FI_TCP_PORT_LOW_RANGE=47900 FI_TCP_PORT_HIGH_RANGE=47999
timeout 60 fi_pingpong -p tcp -e rdm -d lo -B "$port" "$@" &
server=$!
sleep 1
timeout 60 fi_pingpong -p tcp -e rdm -d lo -P "$port" "$@" 127.0.0.1
wait $server
sleep 1
kill $dump
wait $dump 2>/dev/null || true
trap - EXIT
