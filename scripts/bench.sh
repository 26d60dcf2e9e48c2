#!/usr/bin/env bash
# Benchmarks fabricfs's ring data path against real libfabric on loopback:
# for each endpoint type (FI_EP_MSG, FI_EP_RDM) and message size, real
# fi_pingpong (Debian libfabric-bin, -p tcp -e msg|rdm, both sides on
# 127.0.0.1 in domain lo) and scripts/ringpong -e msg|rdm through a freshly
# mounted fabricfs, each run REPEATS times with the order alternating;
# prints fabtests-style tables of the medians and the ratios fabricfs /
# libfabric, and writes everything as JSON. For msg it also runs
# scripts/relay.c, the three-party shape of the fabricfs ping-pong (two
# client processes and one relay polling shared memory and both sockets)
# with nothing else in it, and prints it as the floor of that shape on the
# machine. Sizes above the max_msg_size of
# fabricfs's endpoint type (its getinfo file says) are skipped for that
# type and listed as skipped. See docs/bench.md.
#
# Everything goes to one directory (-o, default build/bench): the printed
# report (report.txt); bench.json, bench.yaml (fabtests' -m format), bench.csv
# (mean, p50 and p99 of the repeats per size) and bench-runs.csv, written by
# scripts/bench_report.py, which also warns when libfabric's own runs were
# much slower than on a quiet machine (the JSON's "loaded"); latency.png and
# bandwidth.png, drawn by scripts/bench_plot.py. -q is a short run that
# only shows the outputs are well formed.
#
# -e provider (in the default list) runs the same libfabric program over
# the project's libfabric provider: fi_pingpong -p fabricfs (bin/
# libfabricfs-fi.so, built by scripts/provider.sh, loaded from
# FI_PROVIDER_PATH, driving the script's mount through FI_FABRICFS_ROOT, in
# the tree's domain tcp/lo) beside fi_pingpong -p tcp, for -e msg, -e rdm
# and -e rdm -m tagged (rdm-tagged), with the same sizes, iteration counts
# and alternation; prints both programs' tables and the ratios
# fabricfs provider / tcp, and writes them as the JSON's "provider" member.
#
# -e verbs adds the software RDMA device (providers/verbs/ibv):
# scripts/verbsperf's RC ping-pong latency and RDMA write bandwidth beside
# raw loopback UDP's, measured in the same run; its table and ratios are
# printed after the others and its results are the JSON's "verbs" member;
# then ringpong -e msg over the verbs domain rxe_127_0_0_1 through the tree
# (the JSON's "verbs_tree").
#
# -e stream (in the default list) is the streaming pass: libfabric's own
# bandwidth programs from fabtests (built by scripts/fabtests.sh build):
# fi_msg_bw, fi_rdm_tagged_bw and fi_rma_bw -o write|read, with -p tcp and
# with -p fabricfs, beside ringpong -bw, the same loop through the rings
# (a window of -W operations posted, completions reaped per window); each
# size one run, alternating, medians of the repeats: message rate (Mmsg/s),
# bandwidth and the CPU seconds per million messages of all the run's
# processes and the daemon's; the ratios to -p tcp and the issue's targets
# as "targets, -e stream KIND" lines; the JSON's "stream" member and
# stream.png. Its sizes are 1 B, 64 B, 64 KiB and 1 MiB (with -A 1 B,
# 64 B, 1, 16, 64 and 256 KiB and 1 MiB) unless -s (or -q) gives others.
#
# -e local (in the default list) is the one-copy pass between endpoints of
# one daemon: ringpong -e rdm over the tree's shm provider (shm/shm) beside
# libfabric's own shm and tcp providers, with the same programs as the
# other passes: the ping-pong (ringpong; fi_pingpong -e rdm), the tagged
# stream (ringpong -bw; fi_rdm_tagged_bw) and RMA write and read
# (ringpong -bw -op write|read; fi_rma_bw -e rdm -o write|read), at the
# stream pass's sizes, alternating, medians; message rate, bandwidth,
# latency and CPU per million messages, the ratios to shm and to tcp and
# the issue's targets as "targets, -e local KIND" lines; the JSON's
# "local" member.
#
#   scripts/bench.sh [-q] [-A] [-e TYPES] [-r REPEATS] [-n ITERS] [-N ITERS_LARGE]
#                    [-w WARMUP] [-s SIZES] [-o DIR] [-x 'RINGPONG FLAGS']
#                    [-b FABRICFS] [-P PORT] [-t SECS] [-C CC] [-F] [-W WINDOW]
#
# The TCP congestion control in force is printed and recorded in the JSON:
# with bbr (this machine's default) TCP paces each flow to its estimate of
# the path's bandwidth, and on loopback that estimate moves between runs,
# which makes large transfers of any implementation slow down by up to
# half in some runs (docs/bench.md, "TCP pacing (bbr)"). -C runs the whole bench
# under another one (net.ipv4.tcp_congestion_control, restored at exit).
#
# -F adds the relay's other shapes to the msg pass (scripts/relay.c -m and
# -p: the relay pinned to a CPU of its own, one relay per end, and one relay
# per end pinned beside its client) and prints each one's time against
# libfabric's: the floor of every way to place the design's three parties
# on the machine (docs/bench.md, "The floor of every shape"). It also runs
# fabricfs in relay-pinned's placement, as fabricfs-pinned: a second daemon
# with its engine on the first CPU the script may use (-engine-cpus) and
# ringpong on the second (taskset); and in split-pinned's, as
# fabricfs-split: each ringpong on one of the two CPUs, its endpoint served
# by an engine group pinned beside it (attr/engine_cpu).
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."

usage() {
	cat >&2 <<'EOF'
usage: scripts/bench.sh [options]
  -e LIST   passes, comma-separated: msg, rdm (ringpong through the tree
            against fi_pingpong -p tcp), provider (fi_pingpong -p fabricfs
            against fi_pingpong -p tcp: -e msg, -e rdm, -e rdm -m tagged),
            stream (fi_msg_bw, fi_rdm_tagged_bw, fi_rma_bw -o write|read
            -p tcp and -p fabricfs against ringpong -bw), local (ringpong
            over the tree's shm provider against fi_pingpong,
            fi_rdm_tagged_bw and fi_rma_bw -p shm and -p tcp), verbs
            (default msg,rdm,provider,stream,local)
  -r N      repeats of each (libfabric, fabricfs) pair; medians are reported (default 5)
  -n N      timed round trips per run for sizes below 64 KiB (default 10000)
  -N N      timed round trips per run for sizes of 64 KiB and more (default 1000)
  -w N      untimed warm-up round trips per fabricfs run (default 100; fi_pingpong has none)
  -s LIST   sizes in bytes, comma-separated (default 64,4096,65536,1048576;
            stream and local: 1,64,65536,1048576)
  -A        all sizes: the powers of two from 1 to 1048576; stream and local:
            1,64,1024,16384,65536,262144,1048576
  -o DIR    output directory: report.txt, bench.json, bench.yaml, bench.csv,
            bench-runs.csv, latency.png, bandwidth.png, stream.png (default build/bench)
  -q        quick: -r 2 -n 100 -N 20 -w 10 -s 64,65536, to check the outputs
            in about a minute (options after -q override it)
  -x FLAGS  extra ringpong flags for both sides, e.g. '-spin 0' (default none)
  -b FILE   mount this fabricfs binary instead of building bin/fabricfs (a patched
            build to compare; it inherits the environment)
  -P PORT   fi_pingpong's control port (default 47592)
  -t SECS   time limit of one run (default 120)
  -C CC     run under TCP congestion control CC (e.g. cubic; one of
            net.ipv4.tcp_available_congestion_control), restoring the
            system's afterwards (default: the system's)
  -F        msg: also run scripts/relay.c's other shapes (relay-pinned, split,
            split-pinned) and print the floor of each against libfabric, and
            fabricfs in relay-pinned's placement (fabricfs-pinned: its engine
            on the first CPU with -engine-cpus, ringpong on the second) and
            in split-pinned's (fabricfs-split: each ringpong on one of the
            two CPUs, its endpoint's engine group beside it, -engine-cpu)
  -W N      stream: operations per window, fabtests' -W (default 64)
EOF
	exit 2
}

cmdline="scripts/bench.sh${*:+ $*}"
eps=msg,rdm,provider,stream,local window=64 repeats=5 iters=10000 iters_large=1000 warmup=100 out="" xflags="" port=47592 limit=120 daemon_bin="" cc="" shapes=0
# The default sizes keep the default run near ten minutes on a 2-vCPU VM
# while covering what the targets judge (64 B, and 64 KiB and up); -A
# takes every power of two for the ping-pongs and seven stream sizes.
sizes=64,4096,65536,1048576
stream_sizes=1,64,65536,1048576
while getopts "e:r:n:N:w:s:o:x:b:P:t:C:W:AFqh" opt; do
	case $opt in
	q) repeats=2 iters=100 iters_large=20 warmup=10 sizes=64,65536 stream_sizes=64,65536 ;;
	A) sizes=1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072,262144,524288,1048576
	   stream_sizes=1,64,1024,16384,65536,262144,1048576 ;;
	e) eps=$OPTARG ;;
	r) repeats=$OPTARG ;;
	n) iters=$OPTARG ;;
	N) iters_large=$OPTARG ;;
	w) warmup=$OPTARG ;;
	s) sizes=$OPTARG stream_sizes=$OPTARG ;;
	o) out=$OPTARG ;;
	x) xflags=$OPTARG ;;
	b) daemon_bin=$OPTARG ;;
	P) port=$OPTARG ;;
	t) limit=$OPTARG ;;
	C) cc=$OPTARG ;;
	F) shapes=1 ;;
	W) window=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
for v in "$repeats" "$iters" "$iters_large" "$warmup" "$port" "$limit" "$window"; do
	[[ $v =~ ^[0-9]+$ ]] || { echo "bench: $v is not a number" >&2; usage; }
done
[ "$repeats" -ge 1 ] && [ "$window" -ge 1 ] || usage
case $out in /*) ;; "") out=$PWD/build/bench ;; *) out=$here/$out ;; esac # paths are the caller's
case $daemon_bin in /* | "") ;; *) daemon_bin=$here/$daemon_bin ;; esac
IFS=, read -r -a size_list <<<"$sizes"
IFS=, read -r -a stream_size_list <<<"$stream_sizes"
for s in "${size_list[@]}" "${stream_size_list[@]}"; do [[ $s =~ ^[0-9]+$ ]] || { echo "bench: bad size $s" >&2; usage; }; done
IFS=, read -r -a all_eps <<<"$eps"
[ ${#all_eps[@]} -ge 1 ] || usage
ep_list=() verbs=0 provider=0 stream=0 local_pass=0
for e in "${all_eps[@]}"; do
	case $e in
	msg | rdm) ep_list+=("$e") ;;
	provider) provider=1 ;;
	stream) stream=1 ;;
	local) local_pass=1 ;;
	verbs) verbs=1 ;;
	*) echo "bench: bad endpoint type $e (msg, rdm, provider, stream, local or verbs)" >&2; usage ;;
	esac
done

say() { printf 'bench: %s\n' "$*" >&2; }

# -F's pinned runs use the first two CPUs this process may run on, as
# relay -p does: the engine (or the relay) on the first, the clients on
# the second.
pin_cpus=()
if [ $shapes -eq 1 ]; then
	read -r -a pin_cpus < <(awk '/^Cpus_allowed_list:/ {
		n = split($2, items, ",")
		for (i = 1; i <= n && k < 2; i++) {
			if (split(items[i], r, "-") == 1) r[2] = r[1]
			for (c = r[1]; c <= r[2] && k < 2; c++) { printf "%d ", c; k++ }
		}
		print ""
	}' /proc/self/status)
	[ ${#pin_cpus[@]} -eq 2 ] || { say "-F needs two CPUs (the pinned shapes)"; exit 1; }
fi

scripts/deps.sh
mkdir -p "$out"
if [ "$(nproc)" -lt 2 ]; then
	say "warning: $(nproc) CPU: fi_pingpong spins, so its two sides take turns a time slice at a time (milliseconds per transfer)"
fi
command -v fi_pingpong >/dev/null || { say "fi_pingpong is missing (package libfabric-bin)"; exit 1; }
export PATH=$PATH:/usr/local/go/bin
mkdir -p bin
if [ -z "$daemon_bin" ]; then
	say "building bin/fabricfs and bin/ringpong"
	go build -o bin/fabricfs ./cmd/fabricfs
	daemon_bin=bin/fabricfs
else
	[ -x "$daemon_bin" ] || { say "$daemon_bin is not an executable"; exit 1; }
	say "building bin/ringpong; the daemon is $daemon_bin"
fi
go build -o bin/ringpong ./scripts/ringpong
gcc -O2 -Wall -o bin/relay scripts/relay.c
if [ $provider -eq 1 ] || [ $stream -eq 1 ]; then
	say "building bin/libfabricfs-fi.so (scripts/provider.sh)"
	scripts/provider.sh
fi
fabtests_bin=$PWD/build/fabtests/install/bin
if [ $stream -eq 1 ] || [ $local_pass -eq 1 ]; then
	say "building fabtests (scripts/fabtests.sh build)"
	scripts/fabtests.sh build
	for p in fi_msg_bw fi_rdm_tagged_bw fi_rma_bw; do
		[ -x "$fabtests_bin/$p" ] || { say "stream: no $fabtests_bin/$p (scripts/fabtests.sh build needs ../shared/fabtests-1.17.1.tar.gz)"; exit 1; }
	done
fi

cc_sysctl=/proc/sys/net/ipv4/tcp_congestion_control cc_saved="" # the system's, while -C's is in force
tmp=$(mktemp -d /tmp/fabricfs-bench.XXXXXX)
mnt=$tmp/mnt mnt_pinned=$tmp/mnt-pinned
mkdir "$mnt" "$mnt_pinned"
daemons=() # the PIDs of the daemons this run started
mapping="" # attr/mapping, as the first fabricfs run reports it
started=() # the PIDs of this run's servers, killed on the way out if still there

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[ -z "$cc_saved" ] || echo "$cc_saved" >"$cc_sysctl" || say "could not restore $cc_sysctl to $cc_saved"
	for p in "${started[@]}"; do kill "$p" 2>/dev/null || true; done
	local d m
	for d in "${daemons[@]}"; do
		kill -TERM "$d" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$d" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$d" 2>/dev/null || true
		wait "$d" 2>/dev/null || true
	done
	for m in "$mnt" "$mnt_pinned"; do
		if grep -q " $m " /proc/mounts 2>/dev/null; then
			umount -l "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || true
		fi
	done
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -n "$cc" ] && [ "$cc" != "$(cat "$cc_sysctl")" ]; then
	grep -qw -- "$cc" /proc/sys/net/ipv4/tcp_available_congestion_control ||
		{ say "-C $cc: not one of $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)"; exit 1; }
	cc_saved=$(cat "$cc_sysctl")
	echo "$cc" >"$cc_sysctl" || { say "-C $cc: cannot set $cc_sysctl"; exit 1; }
	say "TCP congestion control $cc for this run (the system's, $cc_saved, comes back at exit)"
fi
cc_used=$(cat "$cc_sysctl")

# start_daemon MNT [FLAGS...]: mounts fabricfs on MNT.
start_daemon() {
	local m=$1 d
	shift
	"$daemon_bin" "$@" "$m" >"$m.log" 2>&1 &
	d=$!
	daemons+=("$d")
	for _ in $(seq 100); do
		[ -e "$m/abi_version" ] && break
		kill -0 "$d" 2>/dev/null || { cat "$m.log" >&2; say "fabricfs did not start"; exit 1; }
		sleep 0.05
	done
	[ -e "$m/abi_version" ] || { say "fabricfs did not mount $m"; exit 1; }
	say "fabricfs${*:+ $*} mounted on $m (pid $d)"
}
start_daemon "$mnt"
# fabricfs-pinned's daemon: no verbs device (the first daemon's use the port).
[ $shapes -eq 0 ] || start_daemon "$mnt_pinned" -engine-cpus "${pin_cpus[0]}" -verbs-addrs none

# max_msg_size EP: fabricfs's max_msg_size for endpoint type EP (msg, rdm)
# in domain lo, from its getinfo file (fi_getinfo).
max_msg_size() {
	local ans
	exec 3<>"$mnt/getinfo"
	printf '%s\n' "-p tcp -t FI_EP_${1^^} -d lo" >&3
	ans=$(cat <&3)
	exec 3<&-
	awk '$1 == "max_msg_size:" { print $2; exit }' <<<"$ans"
}
# Which sizes each endpoint type runs; the others are skipped, for every
# implementation (no ratio without fabricfs). The provider reports the
# tree's max_msg_size as its own, and its rdm-tagged runs rdm's sizes.
skipped=$tmp/skipped.tsv # ep size max
: >"$skipped"
declare -A ep_sizes
size_eps=("${ep_list[@]}")
[ $provider -eq 0 ] || size_eps+=(msg rdm)
for e in $(printf '%s\n' "${size_eps[@]}" | sort -u); do
	max=$(max_msg_size "$e")
	[ -n "$max" ] || { say "no max_msg_size for FI_EP_${e^^} in $mnt/getinfo"; exit 1; }
	ep_sizes[$e]=$(printf '%s\n' "${size_list[@]}" | awk -v max="$max" -v ep="$e" -v skip="$skipped" '
		$1 + 0 <= max + 0 { printf "%s ", $1; next }
		{ printf "%s\t%s\t%s\n", ep, $1, max >>skip }')
	if grep -q "^$e	" "$skipped"; then
		say "$e: skipping $(awk -v ep="$e" '$1 == ep { printf "%s ", $2 }' "$skipped")B: above fabricfs's FI_EP_${e^^} max_msg_size $max"
	fi
done
[ $provider -eq 0 ] || ep_sizes[rdm-tagged]=${ep_sizes[rdm]}

iters_for() { if [ "$1" -ge 65536 ]; then echo "$iters_large"; else echo "$iters"; fi; }

# forget drops a finished server from the cleanup list.
forget() {
	local keep=() p
	for p in "${started[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	started=("${keep[@]}")
}

# run_fg CMD...: runs CMD and waits for it in the background, so that a
# signal to the script is handled at once (bash defers traps while a
# foreground command runs); meanwhile its PID is on the cleanup list.
run_fg() {
	local pid rc=0
	"$@" &
	pid=$!
	started+=("$pid")
	wait "$pid" || rc=$?
	forget "$pid"
	return $rc
}

# run_pingpong PROV EP SIZE ITERS: fi_pingpong over libfabric's provider
# PROV, tcp or fabricfs (bin/libfabricfs-fi.so over the script's mount),
# with endpoint type EP: msg, rdm, or rdm-tagged (-e rdm -m tagged). Sets
# usec and mbps, the client's usec/xfer and MB/sec. (Not in a subshell,
# so that cleanup knows the server's PID.)
run_pingpong() {
	local prov=$1 ep=$2 size=$3 n=$4 spid rc=1
	local common=(-p "$prov" -e "${ep%-tagged}")
	[ "$ep" = "${ep%-tagged}" ] || common+=(-m tagged)
	if [ "$prov" = tcp ]; then
		# -d lo alone still has the server listen on the first interface's
		# address (eth0's); FI_TCP_IFACE=lo keeps both sides on 127.0.0.1.
		local -x FI_TCP_IFACE=lo
		common+=(-d lo)
	elif [ "$prov" = fabricfs ]; then
		# The provider names the tree's domain PROV/DOMAIN: tcp/lo is the
		# one -p tcp -d lo uses.
		local -x FI_PROVIDER_PATH=$PWD/bin FI_FABRICFS_ROOT=$mnt
		common+=(-d tcp/lo)
	fi
	common+=(-I "$n" -S "$size")
	timeout -k 5 "$limit" fi_pingpong "${common[@]}" -B "$port" >"$tmp/fi_srv.out" 2>&1 &
	spid=$!
	started+=("$spid")
	# The server listens once its fi_getinfo is done; retry until it does.
	for _ in $(seq 100); do
		if run_fg timeout -k 5 "$limit" fi_pingpong "${common[@]}" -P "$port" 127.0.0.1 >"$tmp/fi_cli.out" 2>&1; then
			rc=0
			break
		fi
		grep -q "failed to connect" "$tmp/fi_cli.out" || break
		sleep 0.02
	done
	wait "$spid" || rc=1
	forget "$spid"
	if [ $rc -ne 0 ]; then
		say "fi_pingpong ${common[*]} failed:"
		cat "$tmp/fi_cli.out" "$tmp/fi_srv.out" >&2
		return 1
	fi
	# bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec, after the header
	read -r usec mbps < <(awk '/^[0-9]/ { u = $7; m = $6 } END { print u, m }' "$tmp/fi_cli.out")
}
# run_libfabric EP SIZE ITERS: libfabric's own, fi_pingpong -p tcp.
run_libfabric() { run_pingpong tcp "$@"; }
# run_provider EP SIZE ITERS: fi_pingpong -p fabricfs, the project's
# libfabric provider over the tree.
run_provider() { run_pingpong fabricfs "$@"; }

# run_fabricfs EP SIZE ITERS [MNT]: the same through fabricfs (the mount
# MNT, default the first). The server's ringpong runs under the command
# srv_wrap (such as taskset -c 1) with the extra flags srv_flags, the
# client's under cli_wrap with cli_flags; the callers that place them set
# them as locals.
srv_wrap=() srv_flags=() cli_wrap=() cli_flags=()
run_fabricfs() {
	local ep=$1 size=$2 n=$3 spid addr="" rc=0
	local xf
	read -ra xf <<<"$xflags" # words
	local common=(-mnt "${4:-$mnt}" -e "$ep" -sizes "$size" -iters "$n" -warmup "$warmup" -json "${xf[@]}")
	timeout -k 5 "$limit" "${srv_wrap[@]}" bin/ringpong "${common[@]}" "${srv_flags[@]}" -role server -q >"$tmp/rp_srv.out" 2>"$tmp/rp_srv.err" &
	spid=$!
	started+=("$spid")
	for _ in $(seq 500); do
		addr=$(head -n 1 "$tmp/rp_srv.out" 2>/dev/null || true)
		[ -n "$addr" ] && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.01
	done
	if [ -z "$addr" ]; then
		say "ringpong server did not start:"
		cat "$tmp/rp_srv.err" >&2
		kill "$spid" 2>/dev/null || true
		wait "$spid" 2>/dev/null || true
		forget "$spid"
		return 1
	fi
	# A client that failed leaves its server waiting: end it rather than
	# wait out its time limit.
	run_fg timeout -k 5 "$limit" "${cli_wrap[@]}" bin/ringpong "${common[@]}" "${cli_flags[@]}" -role client -addr "$addr" >"$tmp/rp_cli.out" 2>"$tmp/rp_cli.err" || { rc=1; kill "$spid" 2>/dev/null || true; }
	wait "$spid" || rc=1
	forget "$spid"
	if [ $rc -ne 0 ]; then
		say "ringpong -e $ep -sizes $size failed:"
		cat "$tmp/rp_cli.err" "$tmp/rp_srv.err" >&2
		return 1
	fi
	[ -n "$mapping" ] || mapping=$(sed -n 's/.*"mapping":"\([a-z]*\)".*/\1/p' "$tmp/rp_cli.out" | head -n 1)
	read -r usec mbps < <(grep '"role":"client"' "$tmp/rp_cli.out" | json_result)
}

# run_fabricfs-pinned EP SIZE ITERS: fabricfs in relay-pinned's placement.
run_fabricfs-pinned() {
	local srv_wrap=(taskset -c "${pin_cpus[1]}") cli_wrap=(taskset -c "${pin_cpus[1]}")
	run_fabricfs "$1" "$2" "$3" "$mnt_pinned"
}

# run_fabricfs-split EP SIZE ITERS: fabricfs in split-pinned's placement:
# each ringpong on a CPU of its own, its endpoint served by an engine group
# pinned to the same CPU (attr/engine_cpu, ringpong -engine-cpu).
run_fabricfs-split() {
	local srv_wrap=(taskset -c "${pin_cpus[0]}") srv_flags=(-engine-cpu "${pin_cpus[0]}")
	local cli_wrap=(taskset -c "${pin_cpus[1]}") cli_flags=(-engine-cpu "${pin_cpus[1]}")
	run_fabricfs "$1" "$2" "$3"
}

# awk_median is the awk function median(a, n) of a[1..n] (it sorts a).
awk_median='
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}'

# json_result prints "usec_per_xfer mb_per_sec" of each JSON line on stdin.
json_result() {
	awk '{
		u = $0; sub(/.*"usec_per_xfer":/, "", u); sub(/[,}].*/, "", u)
		m = $0; sub(/.*"mb_per_sec":/, "", m); sub(/[,}].*/, "", m)
		print u, m }'
}

# The relay's shapes (scripts/relay.c): the name of each in the tables
# and JSON, and its flags. relay is fabricfs's own shape, the floor
# fabricfs is compared with; -F runs the others too.
declare -A shape_flags=([relay]="" [relay-pinned]="-p" [split]="-m split" [split-pinned]="-m split -p")
# What msg runs besides the pair: the relay, and with -F its other shapes
# and fabricfs in relay-pinned's and split-pinned's placements. With -F
# they are the columns of the floor-of-every-shape table.
msg_extra=(relay)
[ $shapes -eq 0 ] || msg_extra+=(relay-pinned split split-pinned fabricfs-pinned fabricfs-split)

# run_relay SHAPE SIZE ITERS: the floor of one shape, scripts/relay.c.
run_relay() {
	local shape=$1 size=$2 n=$3
	# shellcheck disable=SC2086 # the flags are words
	run_fg timeout -k 5 "$limit" bin/relay ${shape_flags[$shape]} -S "$size" -I "$n" -w "$warmup" >"$tmp/relay.out" 2>&1 || {
		say "relay ${shape_flags[$shape]} -S $size failed:"
		cat "$tmp/relay.out" >&2
		return 1
	}
	read -r usec mbps < <(json_result <"$tmp/relay.out")
}

# run_pass FILE EP IMPL...: REPEATS runs of each IMPL at each of EP's
# sizes, the order reversed every other size and repeat; appends each run
# to FILE as "ep impl size rep order iters usec mbps". An IMPL is a relay
# shape (run_relay) or has a function run_IMPL EP SIZE ITERS.
run_pass() {
	local file=$1 ep=$2 rep k j size n impl line
	shift 2
	local impls=("$@") order run_sizes
	read -r -a run_sizes <<<"${ep_sizes[$ep]}"
	for ((rep = 1; rep <= repeats; rep++)); do
		for ((k = 0; k < ${#run_sizes[@]}; k++)); do
			size=${run_sizes[$k]}
			n=$(iters_for "$size")
			order=("${impls[@]}")
			# Every other size and repeat runs them in the reverse order.
			if (((rep + k) % 2)); then
				order=()
				for ((j = ${#impls[@]} - 1; j >= 0; j--)); do order+=("${impls[$j]}"); done
			fi
			line="$ep [$rep/$repeats] $size B:"
			for ((j = 0; j < ${#order[@]}; j++)); do
				impl=${order[$j]}
				usec="" mbps=""
				if [ -n "${shape_flags[$impl]+set}" ]; then
					run_relay "$impl" "$size" "$n"
				else
					"run_$impl" "$ep" "$size" "$n" || { say "retrying $impl -e $ep at $size B once"; "run_$impl" "$ep" "$size" "$n"; }
				fi
				if [ -z "$usec" ] || [ -z "$mbps" ]; then
					say "$impl -e $ep at $size B printed no result"
					exit 1
				fi
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$ep" "$impl" "$size" "$rep" "$((j + 1))" "$n" "$usec" "$mbps" >>"$file"
				line="$line $(printf '%s %.2f us %.2f MB/s;' "$impl" "$usec" "$mbps")"
			done
			say "$line $(($(date +%s) - start))s"
		done
	done
}

raw=$tmp/raw.tsv # ringpong's passes (msg, rdm): ep impl size rep order iters usec mbps
praw=$tmp/provider.tsv # the provider's pass, the same columns
: >"$raw"
: >"$praw"
start=$(date +%s)
loadavg_start=$(cut -d ' ' -f 1-3 /proc/loadavg)
say "TCP congestion control $cc_used; endpoint types ${ep_list[*]}; $repeats repeats of each size, libfabric and fabricfs alternating first; $iters round trips below 64 KiB, $iters_large from 64 KiB"
for ep in "${ep_list[@]}"; do
	if [ "$ep" = msg ]; then
		run_pass "$raw" "$ep" libfabric fabricfs "${msg_extra[@]}"
	else
		run_pass "$raw" "$ep" libfabric fabricfs
	fi
done
if [ $provider -eq 1 ]; then
	say "provider: fi_pingpong -p fabricfs (bin/libfabricfs-fi.so over $mnt, domain tcp/lo) against fi_pingpong -p tcp, alternating first"
	for ep in msg rdm rdm-tagged; do run_pass "$praw" "$ep" libfabric provider; done
fi

# The streaming pass (-e stream): libfabric's own bandwidth programs from
# fabtests (fi_msg_bw, fi_rdm_tagged_bw, fi_rma_bw -o write|read) with -p
# tcp, the same programs with -p fabricfs (the provider over the tree's
# tcp/lo), and ringpong -bw, the same loop through the rings (a window of
# -W operations posted, their completions reaped per window), each size
# a run of its own, the order alternating as in run_pass. Every run also
# records the CPU time of all its processes and the daemon's.
#
# Kinds: msg (fi_msg_bw; ringpong -e msg), rdm (fi_rdm_tagged_bw;
# ringpong -e rdm, tagged), write and read (fi_rma_bw -e msg -o OP;
# ringpong -e msg -op OP, both ways at once as fi_rma_bw's).
declare -A stream_prog=([msg]=fi_msg_bw [rdm]=fi_rdm_tagged_bw [write]="fi_rma_bw -e msg -o write" [read]="fi_rma_bw -e msg -o read")
stream_kinds=(msg rdm write read)
stream_impls=(libfabric fabricfs provider)

# cpu_mark: sets cpu_ms, the CPU milliseconds (user + system) of the
# children this script has waited for, and cpu_ticks, the daemon's
# (/proc/PID/stat utime + stime, clock ticks). The kernel adds a process's
# CPU time to its parent's children's once the parent has waited for it,
# and timeout waits for the program it runs: the difference of two marks
# around a run is the CPU of every process of the run, which have all
# exited by then (a process's own /proc/PID/stat is gone once it has).
# Builtins only, so that marking costs no process of its own.
cpu_mark() {
	local line f m s
	times >"$tmp/times"
	{ read -r _; read -r line; } <"$tmp/times"
	cpu_ms=0
	for f in $line; do # "0m1.234s" user, then system
		[[ $f =~ ^([0-9]+)m([0-9]+)\.([0-9]+)s$ ]] || { say "times printed $line"; exit 1; }
		m=${BASH_REMATCH[1]} s=${BASH_REMATCH[2]}
		cpu_ms=$((cpu_ms + m * 60000 + 10#$s * 1000 + 10#${BASH_REMATCH[3]:0:3}))
	done
	read -r line <"/proc/${daemons[0]}/stat"
	read -r -a f <<<"${line##*) }" # the fields after the command's name, from the state (field 3) on
	cpu_ticks=$((f[11] + f[12]))
}
clk_tck=$(getconf CLK_TCK)

# listening PORT: whether a socket listens on 127.0.0.1 or any address at
# PORT (/proc/net/tcp, read without starting a process).
listening() {
	local hex loc st
	printf -v hex '%04X' "$1"
	while read -r _ loc _ st _; do
		[[ $loc == *":$hex" && $st == 0A ]] && return 0
	done </proc/net/tcp
	return 1
}

# run_stream_fabtests PROV KIND SIZE ITERS: KIND's fabtests program over
# libfabric's provider PROV (tcp, or fabricfs: bin/libfabricfs-fi.so over
# the script's mount) with -W, -S SIZE, -I ITERS and -w WARMUP; sets mbps
# and rate (Mmsg/s) from the client's -m line. The client starts once the
# server listens (fabtests' client does not retry).
# The programs are stream_prog's, or those of the table prog_table names.
run_stream_fabtests() {
	local prov=$1 kind=$2 size=$3 n=$4 spid rc=0 prog
	local -n progs=${prog_table:-stream_prog}
	read -r -a prog <<<"${progs[$kind]}"
	local common=("${prog[@]:1}" -p "$prov" -W "$window" -S "$size" -I "$n" -w "$warmup" -m)
	if [ "$prov" = tcp ]; then
		local -x FI_TCP_IFACE=lo
		common+=(-d lo)
	elif [ "$prov" = shm ]; then
		# shm's addresses are names, exchanged out of band on the port
		# (fabtests' -E).
		common+=("-E=$port")
	else
		local -x FI_PROVIDER_PATH=$PWD/bin FI_FABRICFS_ROOT=$mnt
		common+=(-d tcp/lo)
	fi
	timeout -k 5 "$limit" "$fabtests_bin/${prog[0]}" "${common[@]}" -B "$port" >"$tmp/ft_srv.out" 2>&1 &
	spid=$!
	started+=("$spid")
	for _ in $(seq 500); do
		listening "$port" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.01
	done
	run_fg timeout -k 5 "$limit" "$fabtests_bin/${prog[0]}" "${common[@]}" -P "$port" 127.0.0.1 >"$tmp/ft_cli.out" 2>&1 || { rc=1; kill "$spid" 2>/dev/null || true; }
	wait "$spid" || rc=1
	forget "$spid"
	if [ $rc -ne 0 ]; then
		say "${prog[*]} ${common[*]} failed:"
		cat "$tmp/ft_cli.out" "$tmp/ft_srv.out" >&2
		return 1
	fi
	# - { xfer_size: 64, iterations: 2000, ..., MB/sec: 0.46, usec/xfer: 137.7, Mxfers/sec: 0.0072 }
	# The rate is the inverse of usec/xfer, which has six decimals of
	# microseconds where Mxfers/sec has six of Mmsg/s.
	read -r mbps rate < <(awk '/^- \{ xfer_size:/ {
		m = $0; sub(/.*MB\/sec: /, "", m); sub(/,.*/, "", m)
		u = $0; sub(/.*usec\/xfer: /, "", u); sub(/,.*/, "", u)
		if (u + 0 > 0) printf "%s %.9f\n", m, 1 / u }' "$tmp/ft_cli.out")
}
# run_stream_libfabric KIND SIZE ITERS: libfabric's own, -p tcp.
run_stream_libfabric() { run_stream_fabtests tcp "$@"; }
# run_stream_provider KIND SIZE ITERS: the same program over the provider.
run_stream_provider() { run_stream_fabtests fabricfs "$@"; }

# run_stream_fabricfs KIND SIZE ITERS: ringpong -bw, KIND's loop through
# the rings.
# The endpoint type of write and read is stream_ep's, msg unless set.
run_stream_fabricfs() {
	local kind=$1 ep=${stream_ep:-msg} op=send
	case $kind in rdm) ep=rdm ;; write | read) op=$kind ;; esac
	# A window without a completion for 3 s is stuck, not slow: fail
	# early rather than after ringpong's default 30 s.
	local xflags="$xflags -bw -W $window -op $op -timeout 3s"
	run_fabricfs "$ep" "$2" "$3" || return 1
	rate=$(awk '{ r = $0; sub(/.*"mxfers_per_sec":/, "", r); sub(/[,}].*/, "", r); print r }' <<<"$(grep '"role":"client"' "$tmp/rp_cli.out")")
}

# run_rate_pass PASS RAW FAILED: REPEATS runs of each implementation of
# PASS (the array PASS_impls, each run by run_PASS_IMPL KIND SIZE ITERS,
# which sets mbps and rate) at each size of each kind (PASS_kinds), the
# order reversed every other size and repeat, appending "kind impl size
# rep order iters mbps rate cpu_s msgs" to RAW and the runs that failed
# twice to FAILED: cpu_s is the CPU seconds of all the run's processes
# and the daemon's, msgs the messages the run moved, its warm-up included
# (for RMA and the ping-pong both sides', which send at once).
run_rate_pass() {
	local pass=$1 raw=$2 failed=$3 rep k j size n kind impl order ms0 t0 cpu msgs line
	local -n impls=${pass}_impls kinds=${pass}_kinds
	for ((rep = 1; rep <= repeats; rep++)); do
		for ((k = 0; k < ${#stream_size_list[@]}; k++)); do
			size=${stream_size_list[$k]}
			n=$(iters_for "$size")
			for kind in "${kinds[@]}"; do
				order=("${impls[@]}")
				if (((rep + k) % 2)); then
					order=()
					for ((j = ${#impls[@]} - 1; j >= 0; j--)); do order+=("${impls[$j]}"); done
				fi
				msgs=$((n + warmup))
				case $kind in write | read | pingpong) msgs=$((2 * msgs)) ;; esac
				line="$pass $kind [$rep/$repeats] $size B:"
				for ((j = 0; j < ${#order[@]}; j++)); do
					impl=${order[$j]}
					mbps="" rate=""
					cpu_mark
					ms0=$cpu_ms t0=$cpu_ticks
					if ! "run_${pass}_$impl" "$kind" "$size" "$n"; then
						say "retrying $impl $kind at $size B once"
						cpu_mark
						ms0=$cpu_ms t0=$cpu_ticks
						if ! "run_${pass}_$impl" "$kind" "$size" "$n"; then
							# A run that fails twice has no figure: it is
							# listed (FAILED), and the pass goes on.
							printf '%s\t%s\t%s\t%s\n' "$kind" "$impl" "$size" "$rep" >>"$failed"
							line="$line $impl failed;"
							continue
						fi
					fi
					cpu_mark
					if [ -z "$mbps" ] || [ -z "$rate" ]; then
						say "$pass: $impl $kind at $size B printed no result"
						exit 1
					fi
					cpu=$(awk -v ms=$((cpu_ms - ms0)) -v t=$((cpu_ticks - t0)) -v hz="$clk_tck" 'BEGIN { printf "%.3f", ms / 1000 + t / hz }')
					printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$impl" "$size" "$rep" "$((j + 1))" "$n" "$mbps" "$rate" "$cpu" "$msgs" >>"$raw"
					line="$line $(printf '%s %.4f Mmsg/s %.2f MB/s %.2f s CPU;' "$impl" "$rate" "$mbps" "$cpu")"
				done
				say "$line $(($(date +%s) - start))s"
			done
		done
	done
}

sraw=$tmp/stream.tsv # kind impl size rep order iters mbps rate cpu_s msgs
sfailed=$tmp/stream_failed.tsv # kind impl size rep: the runs that failed twice
: >"$sraw"
: >"$sfailed"
if [ $stream -eq 1 ]; then
	say "stream: ${stream_kinds[*]}: fabtests' programs -p tcp and -p fabricfs beside ringpong -bw, window $window, $repeats repeats, alternating first"
	run_rate_pass stream "$sraw" "$sfailed"
fi

# rate_medians RAW: the medians of run_rate_pass's runs per kind,
# implementation and size: "kind impl size iters mbps rate cpu_per_mmsg"
# (cpu_per_mmsg: the median of the runs' CPU seconds per million
# messages).
rate_medians() {
	sort -t "$(printf '\t')" -k1,1 -k2,2 -k3,3n "$1" | awk -F '\t' "$awk_median"'
		function flush() { if (n) printf "%s\t%s\t%s\t%s\t%.6f\t%.6f\t%.4f\n", kind, impl, size, iters, median(m, n), median(r, n), median(c, n); n = 0 }
		$1 != kind || $2 != impl || $3 != size { flush(); kind = $1; impl = $2; size = $3 }
		{ n++; m[n] = $7 + 0; r[n] = $8 + 0; c[n] = ($10 > 0 ? $9 * 1e6 / $10 : 0); iters = $6 }
		END { flush() }'
}
smedians=$tmp/stream_medians.tsv
rate_medians "$sraw" >"$smedians"
# rate_ratios MEDIANS REF: the ratios to the implementation REF per kind,
# other implementation and size: "kind impl size rate_ratio bw_ratio",
# four decimals.
rate_ratios() {
	awk -F '\t' -v ref="$2" '
		$2 == ref { lm[$1, $3] = $5; lr[$1, $3] = $6; next }
		{ key[$1 "\t" $2 "\t" $3] = 1; m[$1, $2, $3] = $5; r[$1, $2, $3] = $6 }
		END {
			for (k in key) {
				split(k, f, "\t")
				if (!((f[1], f[3]) in lm)) continue
				printf "%s\t%.4f\t%.4f\n", k, (lr[f[1], f[3]] > 0 ? r[f[1], f[2], f[3]] / lr[f[1], f[3]] : 0), (lm[f[1], f[3]] > 0 ? m[f[1], f[2], f[3]] / lm[f[1], f[3]] : 0)
			}
		}' "$1" | sort -k1,1 -k2,2 -k3,3n
}
# Ratios to libfabric (-p tcp) of fabricfs and the provider.
sratios=$tmp/stream_ratios.tsv
rate_ratios "$smedians" libfabric >"$sratios"
# The issue's streaming targets for fabricfs (ringpong -bw), a line per
# kind: "kind|rate64|rate_ok|bwmin|bw_ok|bwmin_at|rate_limit|bw_from":
# msg and rdm: the message rate at 64 B at least 2x, the bandwidth from
# 64 KiB at least 1x; write and read: the bandwidth at every size at least
# 1x (rate64 empty). Empty and null when the sizes were not run.
sverdicts=$tmp/stream_verdicts.tsv
awk -F '\t' '
	$2 != "fabricfs" { next }
	{ if (!($1 in seen)) { seen[$1] = 1; kinds[++nk] = $1 }; r[$1, $3] = $4; b[$1, $3] = $5; sizes[$1] = sizes[$1] " " $3 }
	END {
		for (k = 1; k <= nk; k++) {
			kind = kinds[k]; rma = (kind == "write" || kind == "read"); from = (rma ? 0 : 65536)
			rate = ""; min = ""; at = ""
			ns = split(sizes[kind], sz, " ")
			for (i = 1; i <= ns; i++) {
				s = sz[i]
				if (!rma && s == 64) rate = r[kind, s]
				if (s >= from && (min == "" || b[kind, s] + 0 < min + 0)) { min = b[kind, s]; at = s }
			}
			printf "%s|%s|%s|%s|%s|%s|%s|%s\n", kind, rate, (rate != "" ? (rate + 0 >= 2 ? "true" : "false") : "null"),
				min, (min != "" ? (min + 0 >= 1 ? "true" : "false") : "null"), at, (rma ? "" : 2), from
		}
	}' "$sratios" >"$sverdicts"

# The one-copy pass (-e local): ringpong over the tree's shm provider
# (fabricfs), libfabric's shm and libfabric's tcp, RDM all three, each
# kind with the same program as the passes above: pingpong (ringpong;
# fi_pingpong -e rdm), rdm (ringpong -bw, tagged; fi_rdm_tagged_bw),
# write and read (ringpong -bw -op OP; fi_rma_bw -e rdm -o OP). The
# ping-pong's rate is its round trips' inverse, 1 / usec.
declare -A local_prog=([rdm]=fi_rdm_tagged_bw [write]="fi_rma_bw -e rdm -o write" [read]="fi_rma_bw -e rdm -o read")
local_kinds=(pingpong rdm write read)
local_impls=(shm fabricfs tcp)
# pingpong_rate: rate from usec.
pingpong_rate() { rate=$(awk -v u="$usec" 'BEGIN { if (u > 0) printf "%.9f", 1 / u }'); }
# run_local_fabricfs KIND SIZE ITERS: ringpong -e rdm over shm/shm.
run_local_fabricfs() {
	local xflags="$xflags -prov shm -domain shm" stream_ep=rdm
	if [ "$1" = pingpong ]; then
		run_fabricfs rdm "$2" "$3" && pingpong_rate
	else
		run_stream_fabricfs "$@"
	fi
}
# run_local_libfabric PROV KIND SIZE ITERS: KIND's libfabric program
# over libfabric's provider PROV.
run_local_libfabric() {
	local prov=$1 kind=$2 prog_table=local_prog
	if [ "$kind" = pingpong ]; then
		run_pingpong "$prov" rdm "$3" "$4" && pingpong_rate
	else
		run_stream_fabtests "$prov" "$kind" "$3" "$4"
	fi
}
run_local_shm() { run_local_libfabric shm "$@"; }
run_local_tcp() { run_local_libfabric tcp "$@"; }

lraw=$tmp/local.tsv # as sraw
lfailed=$tmp/local_failed.tsv
: >"$lraw"
: >"$lfailed"
if [ $local_pass -eq 1 ]; then
	say "local: ${local_kinds[*]}: ringpong over the tree's shm provider beside libfabric's shm and tcp, window $window, $repeats repeats, alternating first"
	run_rate_pass local "$lraw" "$lfailed"
fi
lmedians=$tmp/local_medians.tsv lratios_shm=$tmp/local_ratios_shm.tsv lratios_tcp=$tmp/local_ratios_tcp.tsv
rate_medians "$lraw" >"$lmedians"
rate_ratios "$lmedians" shm >"$lratios_shm"
rate_ratios "$lmedians" tcp >"$lratios_tcp"
# The issue's targets for the one-copy path, a line per kind:
# "kind|rate64|rate_ok|bw_shm|bw_shm_ok|bw_shm_at|bw_tcp|bw_tcp_ok|bw_tcp_at":
# the message rate at 64 B at least 1x shm's (rdm; empty for the others),
# the bandwidth from 64 KiB at least 1x shm's and at least 1.5x tcp's
# (the lowest ratio and its size); pingpong has none (its latency is
# reported beside shm's). Empty and null when the sizes were not run.
lverdicts=$tmp/local_verdicts.tsv
awk -F '\t' '
	$2 != "fabricfs" { next }
	FILENAME == ARGV[1] { if (!($1 in seen)) { seen[$1] = 1; kinds[++nk] = $1 }; rs[$1, $3] = $4; bs[$1, $3] = $5; sizes[$1] = sizes[$1] " " $3; next }
	{ bt[$1, $3] = $5 }
	END {
		for (k = 1; k <= nk; k++) {
			kind = kinds[k]
			if (kind == "pingpong") continue
			rate = ""; ms = ""; as = ""; mt = ""; at = ""
			ns = split(sizes[kind], sz, " ")
			for (i = 1; i <= ns; i++) {
				s = sz[i]
				if (kind == "rdm" && s == 64) rate = rs[kind, s]
				if (s < 65536) continue
				if (ms == "" || bs[kind, s] + 0 < ms + 0) { ms = bs[kind, s]; as = s }
				if ((kind, s) in bt && (mt == "" || bt[kind, s] + 0 < mt + 0)) { mt = bt[kind, s]; at = s }
			}
			printf "%s|%s|%s|%s|%s|%s|%s|%s|%s\n", kind, rate, (rate != "" ? (rate + 0 >= 1 ? "true" : "false") : "null"),
				ms, (ms != "" ? (ms + 0 >= 1 ? "true" : "false") : "null"), as,
				mt, (mt != "" ? (mt + 0 >= 1.5 ? "true" : "false") : "null"), at
		}
	}' "$lratios_shm" "$lratios_tcp" >"$lverdicts"

if [ $verbs -eq 1 ]; then
	say "verbs: scripts/verbsperf, the software RDMA device beside raw loopback UDP, $repeats repeats"
	go build -o bin/verbsperf ./scripts/verbsperf
	run_fg timeout $((limit * 10)) bin/verbsperf -sizes "$sizes" -r "$repeats" -iters "$iters" -json "$tmp/verbs.json" >"$tmp/verbs.txt" ||
		{ say "verbsperf failed"; exit 1; }
	# The same device through the tree: ringpong -e msg over the verbs
	# domain of 127.0.0.1.
	vdom=rxe_127_0_0_1
	[ -d "$mnt/verbs/$vdom" ] || { say "no verbs domain $vdom in $mnt/verbs"; exit 1; }
	vraw=$tmp/verbs_tree.tsv # size rep iters usec mbps
	: >"$vraw"
	saved_xflags=$xflags
	xflags="$xflags -prov verbs -domain $vdom"
	for ((rep = 1; rep <= repeats; rep++)); do
		for size in "${size_list[@]}"; do
			usec="" mbps=""
			n=$(iters_for "$size")
			run_fabricfs msg "$size" "$n" || { say "ringpong over verbs failed at $size B"; exit 1; }
			printf '%s\t%s\t%s\t%s\t%s\n' "$size" "$rep" "$n" "$usec" "$mbps" >>"$vraw"
			say "verbs tree [$rep/$repeats] $size B: $(printf '%.2f us %.2f MB/s' "$usec" "$mbps")"
		done
	done
	xflags=$saved_xflags
	sort -k1,1n "$vraw" | awk -F '\t' "$awk_median"'
		function flush() { if (n) printf "%s\t%.2f\t%.2f\n", size, median(u, n), median(m, n); n = 0 }
		$1 != size { flush(); size = $1 }
		{ n++; u[n] = $4 + 0; m[n] = $5 + 0 }
		END { flush() }' >"$tmp/verbs_tree_medians.tsv"
fi

# medians_of RAW: the medians per endpoint type, implementation and size
# of RAW's runs: "ep impl size iters usec mbps".
medians_of() {
	sort -t "$(printf '\t')" -k1,1 -k2,2 -k3,3n "$1" | awk -F '\t' "$awk_median"'
		function flush() { if (n) printf "%s\t%s\t%s\t%s\t%.2f\t%.2f\n", ep, impl, size, iters, median(u, n), median(m, n); n = 0 }
		$1 != ep || $2 != impl || $3 != size { flush(); ep = $1; impl = $2; size = $3 }
		{ n++; u[n] = $7 + 0; m[n] = $8 + 0; iters = $6 }
		END { flush() }'
}
medians=$tmp/medians.tsv pmedians=$tmp/provider_medians.tsv
medians_of "$raw" >"$medians"
medians_of "$praw" >"$pmedians"

# table MEDIANS EP IMPL TITLE: a fabtests-style table of IMPL's medians.
table() {
	local file=$1 ep=$2 impl=$3
	printf '\n%s (median of %d runs)\n' "$4" "$repeats"
	awk -F '\t' -v ep="$ep" -v impl="$impl" '
		function sz(n,   b, m, f) {
			b = 1; m = ""
			if (n >= 1073741824) { b = 1073741824; m = "g" } else if (n >= 1048576) { b = 1048576; m = "m" } else if (n >= 1024) { b = 1024; m = "k" }
			f = (int(n / b) < 10) ? int((n % b) * 10 / b) : 0
			return f ? sprintf("%d.%d%s", int(n / b), f, m) : sprintf("%d%s", int(n / b), m)
		}
		function cnt(n) { return n >= 1e9 ? int(n / 1e9) "b" : n >= 1e6 ? int(n / 1e6) "m" : n >= 1e3 ? int(n / 1e3) "k" : n }
		BEGIN { printf "%-8s%-8s%-9s%-8s%8s %10s%13s%13s\n", "bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec" }
		$1 == ep && $2 == impl {
			t = $4 * $5 * 2 / 1e6
			printf "%-8s%-8s=%-8s%-8s%8.2fs%10.2f%11.2f%11.2f\n", sz($3), cnt($4), cnt($4), sz($4 * $3 * 2), t, $6, $5, 1 / $5
		}' "$file"
}
# ratios_of MEDIANS IMPL: IMPL against libfabric per endpoint type and
# size, "ep size lib_usec impl_usec lat_ratio lib_mbps impl_mbps bw_ratio".
# The ratios keep four decimals: the targets are judged on them, not on
# the two the tables show (9.32 us against 6.20 is 1.5025x, not 1.50x).
ratios_of() {
	awk -F '\t' -v impl="$2" '
		$2 == "libfabric" { lu[$1 "\t" $3] = $5; lm[$1 "\t" $3] = $6 }
		$2 == impl { fu[$1 "\t" $3] = $5; fm[$1 "\t" $3] = $6 }
		END { for (s in lu) if (s in fu) printf "%s\t%.2f\t%.2f\t%.4f\t%.2f\t%.2f\t%.4f\n", s, lu[s], fu[s], (lu[s] > 0 ? fu[s] / lu[s] : 0), lm[s], fm[s], (lm[s] > 0 ? fm[s] / lm[s] : 0) }
	' "$1" | sort -k1,1 -k2,2n
}
# ratio_table RATIOS EP LIB IMPL: the ratios of EP, the columns named
# after LIB and IMPL.
ratio_table() {
	printf '%-8s %12s %12s %9s %12s %12s %9s\n' bytes "$3 usec" "$4 usec" "lat x" "$3 MB/s" "$4 MB/s" "bw x"
	awk -F '\t' -v ep="$2" '$1 == ep { printf "%-8s %12.2f %12.2f %9.2f %12.2f %12.2f %9.2f\n", $2, $3, $4, $5, $6, $7, $8 }' "$1"
}
# skipped_line EP: the sizes EP skipped, if any.
skipped_line() {
	awk -F '\t' -v ep="$1" '$1 == ep { s = s " " $2; max = $3 } END { if (s != "") printf "skipped (above fabricfs max_msg_size %s):%s\n", max, s }' "$skipped"
}
ratios=$tmp/ratios.tsv pratios=$tmp/provider_ratios.tsv
ratios_of "$medians" fabricfs >"$ratios"
ratios_of "$pmedians" provider >"$pratios"

# The three-party floor (msg): "size lib_usec relay_usec relay/lib ff_usec ff/relay".
floor=$tmp/floor.tsv
awk -F '\t' '
	$1 != "msg" { next }
	$2 == "libfabric" { lu[$3] = $5 }
	$2 == "relay" { ru[$3] = $5 }
	$2 == "fabricfs" { fu[$3] = $5 }
	END { for (s in ru) if ((s in lu) && (s in fu)) printf "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", s, lu[s], ru[s], (lu[s] > 0 ? ru[s] / lu[s] : 0), fu[s], (ru[s] > 0 ? fu[s] / ru[s] : 0) }
' "$medians" | sort -k1,1n >"$floor"

# Every shape's floor (msg, -F), and fabricfs in two of the placements:
# "size lib_usec usec x_lib ..." in msg_extra's order (empty fields for a
# shape without a result). Without -F, none.
shape_floor=$tmp/shapes.tsv
: >"$shape_floor"
[ $shapes -eq 0 ] || awk -F '\t' -v shapes="${msg_extra[*]}" '
	BEGIN { ns = split(shapes, sh, " ") }
	$1 != "msg" { next }
	$2 == "libfabric" { lu[$3] = $5; next }
	{ u[$2, $3] = $5 }
	END {
		for (s in lu) {
			line = s "\t" lu[s]
			for (i = 1; i <= ns; i++) line = line "\t" (((sh[i], s) in u) && lu[s] > 0 ? sprintf("%.2f\t%.2f", u[sh[i], s], u[sh[i], s] / lu[s]) : "\t")
			print line
		}
	}' "$medians" | sort -k1,1n >"$shape_floor"

# The issue's targets, per endpoint type: latency at 64 B at most 1.5x;
# bandwidth at 64 KiB and up at least 1x; judged for fabricfs and, in the
# msg pass, for every other implementation run (the relay's shapes, that
# is whether the design's floor meets them on this machine). A line per
# type and implementation: "ep impl lat64 lat_ok bwmin bw_ok bwmin_at",
# |-separated (empty and null when the sizes were not run; read splits
# tabs, a whitespace, as one). The ratios are those of the ratios table:
# four decimals, bandwidth from MB/sec.
verdicts=$tmp/verdicts.tsv
awk -F '\t' '
	$2 == "libfabric" { lu[$1, $3] = $5; lm[$1, $3] = $6; next }
	{ if (!(($1, $2) in seen)) { seen[$1, $2] = 1; key[++nk] = $1 SUBSEP $2 }; u[$1, $2, $3] = $5; m[$1, $2, $3] = $6; sizes[$1, $2] = sizes[$1, $2] " " $3 }
	END {
		for (k = 1; k <= nk; k++) {
			split(key[k], em, SUBSEP); ep = em[1]; impl = em[2]
			lat = ""; min = ""; at = ""
			ns = split(sizes[ep, impl], sz, " ")
			for (i = 1; i <= ns; i++) {
				s = sz[i]
				if (!((ep, s) in lu)) continue
				if (s == 64) lat = sprintf("%.4f", (lu[ep, s] > 0 ? u[ep, impl, s] / lu[ep, s] : 0))
				if (s >= 65536) { r = sprintf("%.4f", (lm[ep, s] > 0 ? m[ep, impl, s] / lm[ep, s] : 0)); if (min == "" || r + 0 < min + 0) { min = r; at = s } }
			}
			printf "%s|%s|%s|%s|%s|%s|%s\n", ep, impl, lat, (lat != "" ? (lat + 0 <= 1.5 ? "true" : "false") : "null"),
				min, (min != "" ? (min + 0 >= 1 ? "true" : "false") : "null"), at
		}
	}' "$medians" >"$verdicts"

for ep in "${ep_list[@]}"; do
	table "$medians" "$ep" libfabric "libfabric, -e $ep"
	table "$medians" "$ep" fabricfs "fabricfs, -e $ep"
	if [ "$ep" = msg ]; then for impl in "${msg_extra[@]}"; do table "$medians" msg "$impl" "$impl, -e msg"; done; fi
	printf '\nratios fabricfs / libfabric, -e %s (medians; latency: lower is better, bandwidth: higher is better)\n' "$ep"
	ratio_table "$ratios" "$ep" lf ff
	skipped_line "$ep"
	if [ "$ep" = msg ] && [ -s "$floor" ]; then
		printf '\nthe three-party floor, -e msg: scripts/relay.c (two clients, one relay; medians)\n'
		printf '%-8s %12s %12s %11s %12s %11s\n' bytes "lf usec" "relay usec" "relay/lf" "ff usec" "ff/relay"
		awk -F '\t' '{ printf "%-8s %12.2f %12.2f %11.2f %12.2f %11.2f\n", $1, $2, $3, $4, $5, $6 }' "$floor"
	fi
	if [ "$ep" = msg ] && [ -s "$shape_floor" ]; then
		printf '\nthe floor of every shape, -e msg: scripts/relay.c, and fabricfs in relay-pinned'"'"'s and split-pinned'"'"'s placements; usec and x libfabric (medians)\n'
		printf '%-8s %10s' bytes "lf usec"
		for impl in "${msg_extra[@]}"; do printf ' %15s %6s' "$impl" x; done
		printf '\n'
		awk -F '\t' '{
			printf "%-8s %10.2f", $1, $2
			for (i = 3; i < NF; i += 2) if ($i == "") printf " %15s %6s", "-", "-"; else printf " %15.2f %6.2f", $i, $(i + 1)
			printf "\n" }' "$shape_floor"
	fi
done | tee "$out/report.txt"
printf '\n' | tee -a "$out/report.txt"
# verdict_of EP IMPL: the verdicts line of IMPL in EP's pass, with "null"
# verdicts when it has none (no size was run).
verdict_of() {
	grep "^$1|$2|" "$verdicts" || printf '%s|%s||null||null|\n' "$1" "$2"
}
# verdict LAT64 LAT_OK BWMIN BW_OK AT: the two targets' verdicts as text.
verdict() {
	local lat="$2 (${1}x)" bw="$4 (lowest ${3}x at $5 B)"
	[ -n "$1" ] || lat="not measured (no 64 B run)"
	[ -n "$3" ] || bw="not measured (no run from 64 KiB)"
	printf 'latency at 64 B <= 1.5x libfabric: %s; bandwidth from 64 KiB >= 1x libfabric: %s' "$lat" "$bw"
}
for ep in "${ep_list[@]}"; do
	IFS='|' read -r _ _ lat64 lat_ok bwmin bw_ok bwmin_at < <(verdict_of "$ep" fabricfs)
	printf 'targets, -e %s: %s\n' "$ep" "$(verdict "$lat64" "$lat_ok" "$bwmin" "$bw_ok" "$bwmin_at")"
done | tee -a "$out/report.txt"
if [[ " ${ep_list[*]} " == *" msg "* ]]; then
	printf 'the same targets for the floor and the other placements, -e msg:\n'
	for impl in "${msg_extra[@]}"; do
		IFS='|' read -r _ _ lat64 lat_ok bwmin bw_ok bwmin_at < <(verdict_of msg "$impl")
		printf '  %-16s %s\n' "$impl" "$(verdict "$lat64" "$lat_ok" "$bwmin" "$bw_ok" "$bwmin_at")"
	done
fi | tee -a "$out/report.txt"
# pp_flags EP: fi_pingpong's flags for the provider pass's type EP.
pp_flags() { if [ "$1" = rdm-tagged ]; then echo "-e rdm -m tagged"; else echo "-e $1"; fi; }
if [ $provider -eq 1 ]; then
	for ep in msg rdm rdm-tagged; do
		table "$pmedians" "$ep" libfabric "fi_pingpong -p tcp $(pp_flags "$ep")"
		table "$pmedians" "$ep" provider "fi_pingpong -p fabricfs $(pp_flags "$ep"), the provider over the tree's tcp/lo"
		printf '\nratios fabricfs provider / tcp, fi_pingpong %s (medians; latency: lower is better, bandwidth: higher is better)\n' "$(pp_flags "$ep")"
		ratio_table "$pratios" "$ep" tcp prov
		skipped_line "${ep%-tagged}"
	done
fi | tee -a "$out/report.txt"
# The streaming tables: per kind and size, the three implementations'
# message rate, bandwidth and CPU per million messages, and the ratios
# to libfabric; then the verdicts.
if [ $stream -eq 1 ]; then
	for kind in "${stream_kinds[@]}"; do
		printf '\nstream, %s: %s -p tcp (lf), ringpong -bw (ff), %s -p fabricfs (prov); window %s, medians of %d runs\n' \
			"$kind" "${stream_prog[$kind]}" "${stream_prog[$kind]}" "$window" "$repeats"
		printf '%-8s %9s %9s %9s %6s %6s %10s %10s %10s %6s %6s %8s %8s %8s\n' bytes "lf Mmsg/s" "ff Mmsg/s" "pv Mmsg/s" "ff x" "pv x" \
			"lf MB/s" "ff MB/s" "pv MB/s" "ff x" "pv x" "lf CPU" "ff CPU" "pv CPU"
		awk -F '\t' -v kind="$kind" '
			FILENAME == ARGV[1] { if ($1 == kind) { m[$2, $3] = $5; r[$2, $3] = $6; c[$2, $3] = $7; if ($2 == "fabricfs") sz[++ns] = $3 }; next }
			$1 == kind { rr[$2, $3] = $4; br[$2, $3] = $5 }
			END {
				for (i = 1; i <= ns; i++) {
					s = sz[i]
					printf "%-8s %9.4f %9.4f %9.4f %6.2f %6.2f %10.2f %10.2f %10.2f %6.2f %6.2f %8.2f %8.2f %8.2f\n", s,
						r["libfabric", s], r["fabricfs", s], r["provider", s], rr["fabricfs", s], rr["provider", s],
						m["libfabric", s], m["fabricfs", s], m["provider", s], br["fabricfs", s], br["provider", s],
						c["libfabric", s], c["fabricfs", s], c["provider", s]
				}
			}' "$smedians" "$sratios"
	done
	printf '(CPU: seconds per million messages of all processes together, the daemon included, warm-up counted)\n'
	if [ -s "$sfailed" ]; then
		printf 'failed twice, no figure (kind impl bytes repeat):'
		awk -F '\t' '{ printf " %s %s %s #%s;", $1, $2, $3, $4 }' "$sfailed"
		printf '\n'
	fi
	printf '\n'
	for kind in "${stream_kinds[@]}"; do
		IFS='|' read -r _ rate rate_ok bwmin bw_ok at _ _ < <(grep "^$kind|" "$sverdicts" || printf '%s||null||null|||\n' "$kind")
		bw="$bw_ok (lowest ${bwmin}x at $at B)"
		[ -n "$bwmin" ] || bw="not measured"
		case $kind in
		write | read)
			printf 'targets, -e stream %s: bandwidth >= 1x %s -p tcp at every size: %s\n' "$kind" "${stream_prog[$kind]}" "$bw"
			;;
		*)
			r="$rate_ok (${rate}x)"
			[ -n "$rate" ] || r="not measured (no 64 B run)"
			[ -n "$bwmin" ] || bw="not measured (no run from 64 KiB)"
			printf 'targets, -e stream %s: message rate at 64 B >= 2x %s -p tcp: %s; bandwidth from 64 KiB >= 1x: %s\n' "$kind" "${stream_prog[$kind]}" "$r" "$bw"
			;;
		esac
	done
fi | tee -a "$out/report.txt"
# The one-copy pass's tables: per kind and size, the three
# implementations' message rate (the ping-pong: its latency), bandwidth
# and CPU per million messages, fabricfs's ratios to shm and tcp; then
# the verdicts.
if [ $local_pass -eq 1 ]; then
	for kind in "${local_kinds[@]}"; do
		prog=${local_prog[$kind]:-fi_pingpong -e rdm}
		printf '\nlocal, %s: ringpong over shm/shm (ff), %s -p shm (shm) and -p tcp (tcp); window %s, medians of %d runs\n' \
			"$kind" "$prog" "$window" "$repeats"
		unit="Mmsg/s" fmt="%9.4f"
		[ "$kind" != pingpong ] || unit="usec" fmt="%9.2f"
		printf '%-8s %9s %9s %9s %7s %7s %10s %10s %10s %7s %7s %8s %8s %8s\n' bytes "ff $unit" "shm" "tcp" "x shm" "x tcp" \
			"ff MB/s" "shm MB/s" "tcp MB/s" "x shm" "x tcp" "ff CPU" "shm CPU" "tcp CPU"
		awk -F '\t' -v kind="$kind" -v fmt="$fmt" '
			FILENAME == ARGV[1] { if ($1 == kind) { m[$2, $3] = $5; r[$2, $3] = $6; c[$2, $3] = $7; if ($2 == "fabricfs") sz[++ns] = $3 }; next }
			FILENAME == ARGV[2] { if ($1 == kind) { rs[$2, $3] = $4; bs[$2, $3] = $5 }; next }
			$1 == kind { rt[$2, $3] = $4; bt[$2, $3] = $5 }
			function shown(v) { return kind == "pingpong" ? (v > 0 ? 1 / v : 0) : v }
			function ratio(v) { return kind == "pingpong" ? (v > 0 ? 1 / v : 0) : v }
			END {
				for (i = 1; i <= ns; i++) {
					s = sz[i]
					printf "%-8s " fmt " " fmt " " fmt " %7.2f %7.2f %10.2f %10.2f %10.2f %7.2f %7.2f %8.2f %8.2f %8.2f\n", s,
						shown(r["fabricfs", s]), shown(r["shm", s]), shown(r["tcp", s]), ratio(rs["fabricfs", s]), ratio(rt["fabricfs", s]),
						m["fabricfs", s], m["shm", s], m["tcp", s], bs["fabricfs", s], bt["fabricfs", s],
						c["fabricfs", s], c["shm", s], c["tcp", s]
				}
			}' "$lmedians" "$lratios_shm" "$lratios_tcp"
	done
	printf '(pingpong: latency, x = fabricfs / libfabric, lower is better; the others: rate and bandwidth, higher is better. CPU: seconds per million messages of all processes together, the daemon included)\n'
	if [ -s "$lfailed" ]; then
		printf 'failed twice, no figure (kind impl bytes repeat):'
		awk -F '\t' '{ printf " %s %s %s #%s;", $1, $2, $3, $4 }' "$lfailed"
		printf '\n'
	fi
	printf '\n'
	for kind in "${local_kinds[@]}"; do
		if [ "$kind" = pingpong ]; then
			printf 'targets, -e local pingpong: latency at 64 B reported beside shm: %s\n' "$(awk -F '\t' '
				$1 == "pingpong" && $3 == 64 { u[$2] = ($6 > 0 ? 1 / $6 : 0) }
				END { if ("fabricfs" in u) printf "fabricfs %.2f us, shm %.2f us (%.2fx), tcp %.2f us", u["fabricfs"], u["shm"], (u["shm"] > 0 ? u["fabricfs"] / u["shm"] : 0), u["tcp"]; else printf "not measured (no 64 B run)" }' "$lmedians")"
			continue
		fi
		IFS='|' read -r _ rate rate_ok bs bs_ok bs_at bt bt_ok bt_at < <(grep "^$kind|" "$lverdicts" || printf '%s||null||null||||null|\n' "$kind")
		shm_t="$bs_ok (lowest ${bs}x at $bs_at B)" tcp_t="$bt_ok (lowest ${bt}x at $bt_at B)"
		[ -n "$bs" ] || shm_t="not measured (no run from 64 KiB)"
		[ -n "$bt" ] || tcp_t="not measured (no run from 64 KiB)"
		r=""
		if [ "$kind" = rdm ]; then
			r="$rate_ok (${rate}x)"
			[ -n "$rate" ] || r="not measured (no 64 B run)"
			r="message rate at 64 B >= 1x shm: $r; "
		fi
		printf 'targets, -e local %s: %sbandwidth from 64 KiB >= 1x %s -p shm: %s; >= 1.5x -p tcp: %s\n' "$kind" "$r" "${local_prog[$kind]}" "$shm_t" "$tcp_t"
	done
fi | tee -a "$out/report.txt"
if [ $verbs -eq 1 ]; then
	printf '\nverbs: software RDMA device (RC, 127.0.0.1 <-> 127.0.0.2) beside raw loopback UDP (medians; lat x = rc/udp, bw x = write/udp)\n'
	cat "$tmp/verbs.txt"
	printf '\nverbs through the tree: ringpong -prov verbs -domain rxe_127_0_0_1 -e msg (medians)\n'
	printf '%-8s %12s %12s\n' bytes "usec/xfer" "MB/sec"
	awk -F '\t' '{ printf "%-8s %12.2f %12.2f\n", $1, $2, $3 }' "$tmp/verbs_tree_medians.tsv"
fi | tee -a "$out/report.txt"

# The files: scripts/bench_report.py encodes what the script measured
# and computed (its files in $tmp, and meta.tsv: the run's configuration
# and host) and prints the load verdict; scripts/bench_plot.py draws it.
{
	printf 'command\t%s\n' "$cmdline"
	printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf 'kernel\t%s\n' "$(uname -r)"
	printf 'cpus\t%s\n' "$(nproc)"
	printf 'go\t%s\n' "$(go env GOVERSION)"
	printf 'libfabric\t%s\n' "$(dpkg-query -W -f='${Version}' libfabric1 2>/dev/null || echo unknown)"
	printf 'fabricfs_commit\t%s\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	printf 'mapping\t%s\n' "$mapping"
	printf 'tcp_congestion_control\t%s\n' "$cc_used"
	printf 'loadavg_start\t%s\n' "$loadavg_start"
	printf 'loadavg_end\t%s\n' "$(cut -d ' ' -f 1-3 /proc/loadavg)"
	printf 'endpoint_types\t%s\n' "$eps"
	printf 'ep_list\t%s\n' "${ep_list[*]}"
	printf 'msg_extra\t%s\n' "${msg_extra[*]}"
	printf 'repeats\t%s\niters\t%s\niters_large\t%s\nwarmup\t%s\n' "$repeats" "$iters" "$iters_large" "$warmup"
	printf 'sizes\t%s\n' "$sizes"
	printf 'ringpong_flags\t%s\n' "$xflags"
	printf 'fabricfs_daemon\t%s\n' "$daemon_bin"
	printf 'provider\t%s\nverbs\t%s\n' "$provider" "$verbs"
	printf 'stream\t%s\nwindow\t%s\nstream_sizes\t%s\n' "$stream" "$window" "$stream_sizes"
	printf 'local\t%s\n' "$local_pass"
} >"$tmp/meta.tsv"
# Debian's python3, which has the modules scripts/deps.sh installs (a
# python3 earlier in PATH, such as pyenv's, may not).
/usr/bin/python3 scripts/bench_report.py "$tmp" "$out" | tee -a "$out/report.txt"
/usr/bin/python3 scripts/bench_plot.py "$out/bench.json" "$out"
say "wrote $out: report.txt bench.json bench.yaml bench.csv bench-runs.csv$([ ${#ep_list[@]} -eq 0 ] && [ $provider -eq 0 ] && [ $verbs -eq 0 ] || echo ' latency.png bandwidth.png')$([ $stream -eq 0 ] || echo ' stream.png')$([ $local_pass -eq 0 ] || echo ' local.png') ($(($(date +%s) - start))s of measurements)"
