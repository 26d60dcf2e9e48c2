#!/usr/bin/env bash
# Soak: a fabricfs daemon under mixed traffic from several users for a
# while, with attacks by another user running beside it, on loopback only.
#
#   scripts/soak.sh [-d DURATION] [-o FILE] [-u USERS] [-k]
#
# -d is how long it runs (sleep(1)'s format: 30m, 2m, 90s; default 30m);
# -o is where the summary goes as markdown (default soak.md in the work
# directory, whose path it prints; docs/soak.md holds a 30-minute run);
# -u the number of victim users (default 3); -k keeps the work directory.
# Run it as root: it mounts its own daemon under a new temporary directory,
# and makes the users ffsoak1..N (victims) and ffsoakx (the attacker) with
# useradd when they are missing, removing at the end those it made.
#
# Victims, each its own user, in loops until the end:
#   pp     user ffsoak1: clients/c/pingpong, tcp/lo FI_EP_MSG through the
#          rings (200 round trips of 4 KiB a run; its usec per round trip)
#   rdm    user ffsoak2: FI_EP_RDM tcp;ofi_rxm over tcp/lo with sh and the
#          data files (20 round trips a run, objects made and removed)
#   verbs  user ffsoak3: the same over verbs/rxe_127_0_0_1 (verbs;ofi_rxm)
# (with -u above 3, users 4.. run pp too). Attackers, as ffsoakx, for the
# first 70% of the time, then they stop and their objects go:
#   keys    verbs key guessing: reads and writes of a root region (remote
#           read/write) through an RDM endpoint, with random 32-bit keys
#   peers   RDM peer-table flooding: new endpoints (new ports) that each
#           send one message to a root RDM endpoint
#   fds     idle connections to root's listeners (a passive endpoint and
#           the RDM endpoint), up to 4,000, reopened as they close
#   err     3 MB writes to the ctl files of 100 objects kept open
#   mr      memory regions of 64 MiB, touched, kept open, up to 1 GiB
# Probes as root every minute: a new RDM endpoint sends to the flooded one,
# a new passive endpoint listens, a new region registers.
#
# Every minute it prints the daemon's open fds (/proc/PID/fd), threads,
# RSS, each victim's runs, failures and mean latency, and the attacks'
# progress. At the end it checks: each victim had successful runs in every
# minute and no failure; after the attackers stopped, the daemon's fds and
# RSS came back near their baseline (taken before the attacks); no key
# guess hit; the probes never failed. It prints the summary, writes it to
# FILE and exits 0 only if every check held. Every wait is bounded; it
# stops by itself and kills only the processes it started.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin

# ---- helper modes, run as a victim or attacker user ------------------

# rdm_run DOMDIR PREFIX COUNT: one run of the RDM victim. Prints
# "ok USEC_PER_ROUNDTRIP" or "FAIL what".
# The helper modes' variables are global: their EXIT traps use them.
rdm_run() {
	D=$1 P=$2 n=$3
	trap 'rmdir "$D/ep/${P}a" "$D/ep/${P}b" "$D/av/$P" "$D/cq/$P" 2>/dev/null' EXIT
	fail() { echo "FAIL $*: $(cat "$D/ep/${P}a/err" "$D/ep/${P}b/err" 2>/dev/null | tr '\n' ' ')"; exit 1; }
	mkdir "$D/cq/$P" "$D/av/$P" "$D/ep/${P}a" "$D/ep/${P}b" || fail mkdir
	for e in a b; do
		echo FI_EP_RDM >"$D/ep/$P$e/attr/type" || fail type
		for c in "bind cq $P send,recv" "bind av $P" enable; do
			echo "$c" >"$D/ep/$P$e/ctl" || fail "$c"
		done
	done
	A=$(cat "$D/ep/${P}a/local") B=$(cat "$D/ep/${P}b/local")
	echo "insert $B" >"$D/av/$P/ctl" || fail insert # fi_addr 0
	echo "insert $A" >"$D/av/$P/ctl" || fail insert # fi_addr 1
	echo "dest 0" >"$D/ep/${P}a/ctl" && echo "dest 1" >"$D/ep/${P}b/ctl" || fail dest
	t0=$(date +%s%N)
	for ((i = 0; i < n; i++)); do
		echo "ping $i" >"$D/ep/${P}a/data" || fail "send $i"
		m=$(timeout 10 cat "$D/ep/${P}b/data") && [ "$m" = "ping $i" ] || fail "recv $i: '$m'"
		echo "pong $i" >"$D/ep/${P}b/data" || fail "reply $i"
		m=$(timeout 10 cat "$D/ep/${P}a/data") && [ "$m" = "pong $i" ] || fail "recv reply $i: '$m'"
	done
	t1=$(date +%s%N)
	echo "ok $(((t1 - t0) / 1000 / n))"
}

# keys_attack DOMDIR VICTIM_ADDR END: reads and writes of the victim's
# region with random keys until END (epoch seconds). Prints progress lines
# "tries N hits H".
keys_attack() {
	D=$1 V=$2 end=$3 P=atkk tries=0 hits=0
	trap 'rmdir "$D/ep/$P" "$D/mr/$P" "$D/av/$P" "$D/cq/$P" 2>/dev/null' EXIT
	mkdir "$D/cq/$P" "$D/av/$P" "$D/ep/$P" "$D/mr/$P" || { echo "setup failed"; return; }
	echo FI_EP_RDM >"$D/ep/$P/attr/type"
	for c in "bind cq $P send,recv" "bind av $P" enable; do echo "$c" >"$D/ep/$P/ctl"; done
	echo "insert $V" >"$D/av/$P/ctl"
	echo "dest 0" >"$D/ep/$P/ctl"
	echo 4096 >"$D/mr/$P/attr/len"
	echo FI_READ,FI_WRITE >"$D/mr/$P/attr/access"
	echo reg >"$D/mr/$P/ctl"
	while (($(date +%s) < end)); do
		for ((j = 0; j < 500; j++)); do
			key=$(((RANDOM << 17 ^ RANDOM << 2 ^ RANDOM >> 13) & 0xffffffff))
			op=read
			((j & 1)) && op=write
			if echo "$op $P 0 8 0 $key" >"$D/ep/$P/ctl" 2>/dev/null; then
				hits=$((hits + 1))
				echo "hit key=$key op=$op"
			fi
			tries=$((tries + 1))
		done
		echo "tries $tries hits $hits"
	done
}

# peers_attack DOMDIR VICTIM_ADDR END: a new RDM endpoint per try, each
# sending one message to the victim. Prints "tries N failed F".
peers_attack() {
	D=$1 V=$2 end=$3 P=atkp tries=0 failed=0
	trap 'rmdir "$D/ep/$P" "$D/av/$P" "$D/cq/$P" 2>/dev/null' EXIT
	mkdir "$D/cq/$P" "$D/av/$P" || { echo "setup failed"; return; }
	echo "insert $V" >"$D/av/$P/ctl"
	while (($(date +%s) < end)); do
		for ((j = 0; j < 50; j++)); do
			tries=$((tries + 1))
			if ! {
				mkdir "$D/ep/$P" &&
					echo FI_EP_RDM >"$D/ep/$P/attr/type" &&
					echo "bind cq $P send,recv" >"$D/ep/$P/ctl" &&
					echo "bind av $P" >"$D/ep/$P/ctl" &&
					echo enable >"$D/ep/$P/ctl" &&
					echo "dest 0" >"$D/ep/$P/ctl" &&
					echo x >"$D/ep/$P/data"
			} 2>/dev/null; then
				failed=$((failed + 1))
			fi
			rmdir "$D/ep/$P" 2>/dev/null
		done
		echo "tries $tries failed $failed"
	done
}

case "${1:-}" in
--rdm-run) shift; rdm_run "$@"; exit ;;
--keys) shift; keys_attack "$@"; exit ;;
--peers) shift; peers_attack "$@"; exit ;;
esac

# ---- the soak ----------------------------------------------------------

duration=30m out="" nusers=3 keep=0
while getopts d:o:u:k o; do
	case $o in
	d) duration=$OPTARG ;;
	o) out=$OPTARG ;;
	u) nusers=$OPTARG ;;
	k) keep=1 ;;
	*) sed -n '2,20p' "$0" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "soak.sh: run it as root (it mounts a daemon and makes users)" >&2; exit 2; }
case $duration in
*s) secs=${duration%s} ;; *m) secs=$((${duration%m} * 60)) ;; *h) secs=$((${duration%h} * 3600)) ;; *) secs=$duration ;;
esac
[[ $secs =~ ^[0-9]+$ ]] && ((secs >= 60)) || { echo "soak.sh: -d $duration: at least 1m" >&2; exit 2; }
((nusers >= 3)) || { echo "soak.sh: -u: at least 3" >&2; exit 2; }

W=$(mktemp -d /tmp/fabricfs-soak.XXXXXX)
chmod 755 "$W"
out=${out:-$W/soak.md}
MNT=$W/fabric
mkdir -p "$MNT" "$W/bin" "$W/log"
chmod 755 "$W/bin" "$W/log" "$MNT"
pids=()          # every process this script started, to stop at the end
made_users=()    # the users it made
dpid=""

stop_pids() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do
		for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	pids=()
}
finish() {
	stop_pids
	if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
		kill -TERM "$dpid"
		for ((i = 0; i < 150; i++)); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$dpid" 2>/dev/null
	fi
	mountpoint -q "$MNT" && umount -l "$MNT"
	for u in "${made_users[@]}"; do userdel "$u" 2>/dev/null; done
	# The work directory goes unless asked to keep it or it holds the summary.
	if ((keep == 0)) && [ "${out#"$W"/}" = "$out" ]; then rm -rf "$W"; else echo "== logs in $W/log"; fi
}
trap finish EXIT
trap 'exit 130' INT TERM

echo "== building into $W/bin"
(cd "$here" && scripts/gofuse.sh && go build -o "$W/bin/fabricfs" ./cmd/fabricfs) || exit 1
gcc -O2 -Wall -o "$W/bin/pingpong" "$here/clients/c/pingpong.c" || exit 1
cp "$0" "$W/bin/soak.sh"
chmod 755 "$W/bin"/*

py=/usr/bin/python3 # not a shim under root's home: the other users run it
[ -x $py ] || { echo "soak.sh: needs $py" >&2; exit 2; }
users=()
for ((i = 1; i <= nusers; i++)); do users+=("ffsoak$i"); done
for u in "${users[@]}" ffsoakx; do
	if ! id "$u" >/dev/null 2>&1; then
		useradd -M -r -s /usr/sbin/nologin "$u" || exit 1
		made_users+=("$u")
	fi
done
# as USER CMD...: runs CMD as USER in place of the calling (sub)shell, so
# that the PID of `as ... &` is the command's.
as() {
	local u=$1
	shift
	exec setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}

port=$($py -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$W/bin/fabricfs" -verbs-addrs 127.0.0.1 -roce-port "$port" "$MNT" >"$W/log/daemon.log" 2>&1 &
dpid=$!
for ((i = 0; i < 200; i++)); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { echo "fabricfs did not mount"; cat "$W/log/daemon.log"; exit 1; }
echo "== fabricfs pid $dpid on $MNT, RoCE port $port, for $secs s"

L=$MNT/tcp/lo V=$MNT/verbs/rxe_127_0_0_1
# Root's targets: an RDM endpoint per domain, a verbs region with remote
# access holding a secret, a listener.
for D in "$L" "$V"; do
	mkdir "$D/cq/soak" "$D/av/soak" "$D/ep/soak"
	echo FI_EP_RDM >"$D/ep/soak/attr/type"
	for c in "bind cq soak send,recv" "bind av soak" enable; do echo "$c" >"$D/ep/soak/ctl"; done
done
mkdir "$V/mr/soak"
echo 4096 >"$V/mr/soak/attr/len"
echo FI_REMOTE_READ,FI_REMOTE_WRITE >"$V/mr/soak/attr/access"
echo reg >"$V/mr/soak/ctl"
secret="root's secret $RANDOM$RANDOM"
printf '%s' "$secret" | dd of="$V/mr/soak/data" conv=notrunc status=none
mkdir "$L/eq/soak" "$L/pep/soak"
echo "bind eq soak" >"$L/pep/soak/ctl"
echo listen >"$L/pep/soak/ctl"
rdmL=$(cat "$L/ep/soak/local") rdmV=$(cat "$V/ep/soak/local") pepL=$(cat "$L/pep/soak/local")

start=$(date +%s)
end=$((start + secs))
atk_end=$((start + secs * 7 / 10))

# Victims.
victim() { # victim NAME USER CMD...: runs CMD in a loop as USER, logging "EPOCH ok USEC" or "EPOCH FAIL ..."
	local name=$1 u=$2
	shift 2
	while (($(date +%s) < end - 2)); do
		r=$( (as "$u" timeout 60 "$@") 2>&1 | tail -1)
		case $r in
		ok*) echo "$(date +%s) ok $(echo "$r" | awk '{print $NF}')" ;;
		*) echo "$(date +%s) FAIL $r" ;;
		esac >>"$W/log/victim-$name"
	done
}
victims=(pp rdm verbs)
victim pp "${users[0]}" "$W/bin/pingpong" "$MNT" 200 4096 &
pids+=($!)
victim rdm "${users[1]}" "$W/bin/soak.sh" --rdm-run "$L" v2 20 &
pids+=($!)
victim verbs "${users[2]}" "$W/bin/soak.sh" --rdm-run "$V" v3 20 &
pids+=($!)
for ((i = 3; i < nusers; i++)); do
	victims+=("pp$((i + 1))")
	victim "pp$((i + 1))" "${users[i]}" "$W/bin/pingpong" "$MNT" 200 4096 &
	pids+=($!)
done
# Root drains the flooded RDM endpoint's messages.
(while (($(date +%s) < end)); do timeout 5 cat "$L/ep/soak/data" >/dev/null 2>&1; done) &
pids+=($!)

fds() { ls "/proc/$dpid/fd" 2>/dev/null | wc -l; }
threads() { awk '/^Threads:/{print $2}' "/proc/$dpid/status" 2>/dev/null; }
rss() { awk '/^VmRSS:/{print $2}' "/proc/$dpid/status" 2>/dev/null; } # KiB
memfd() { # MiB of the daemon's memfds: rings and regions
	local f t=0
	for f in /proc/$dpid/fd/*; do
		case $(readlink "$f" 2>/dev/null) in /memfd:*) t=$((t + $(stat -L -c %s "$f" 2>/dev/null || echo 0))) ;; esac
	done
	echo $((t >> 20))
}

sleep 10
base_fds=$(fds) base_rss=$(rss) base_thr=$(threads) base_shm=$(memfd)
echo "== baseline: fds $base_fds, threads $base_thr, RSS $((base_rss / 1024)) MiB, memfd $base_shm MiB"

# Attackers, as ffsoakx, until atk_end.
cat >"$W/bin/attacks.py" <<'EOF'
import os, resource, socket, sys, time, mmap
kind, mnt, end = sys.argv[1], sys.argv[2], int(sys.argv[3])
dom = mnt + "/tcp/lo"
def say(*a):
    print(*a, flush=True)
if kind == "fds":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    targets = []
    for t in sys.argv[4:]:
        host, port = t.rsplit("/", 1)[-1].rsplit(":", 1)
        targets.append((host, int(port)))
    per = 4000 // len(targets)
    socks = {t: [] for t in targets}
    peak = 0
    while time.time() < end:
        made = failed = 0
        for t in targets:
            socks[t] = [s for s in socks[t] if s.fileno() >= 0]
            alive = []
            for s in socks[t]:  # a socket the daemon closed reads as EOF
                try:
                    s.setblocking(False)
                    if s.recv(1, socket.MSG_PEEK) == b"":
                        s.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    continue
                alive.append(s)
            socks[t] = alive
            while len(socks[t]) < per and time.time() < end:
                try:
                    s = socket.create_connection(t, timeout=1)
                    socks[t].append(s)
                    made += 1
                except OSError:
                    failed += 1
                    break
        held = sum(len(v) for v in socks.values())
        peak = max(peak, held)
        say("held %d peak %d refused %d" % (held, peak, failed))
        time.sleep(5)
elif kind == "err":
    fds, kept = [], 0
    for i in range(100):
        if time.time() >= end:
            break
        try:
            fd = os.open(dom + "/eq/clone", os.O_RDWR)
        except OSError as e:
            say("clone failed after %d: %s" % (i, e))
            break
        fds.append(fd)
        try:
            os.write(fd, b"x" * 3000000)
        except OSError:
            pass
        kept += 1
    say("objects %d with 3 MB written" % kept)
    while time.time() < end:
        time.sleep(1)
elif kind == "mr":
    held, maps, fds, why, mid = 0, [], [], "", ""
    vdom = mnt + "/verbs/rxe_127_0_0_1"
    while held < (1 << 30) and time.time() < end:
        try:
            fd = os.open(dom + "/mr/clone", os.O_RDWR)
            fds.append(fd)
            mid = os.read(fd, 64).decode().strip()
            base = dom + "/mr/" + mid
            with open(base + "/attr/len", "w") as f:
                f.write(str(64 << 20))
            os.write(fd, b"reg")
            dfd = os.open(base + "/data", os.O_RDWR)
            m = mmap.mmap(dfd, 64 << 20)
            os.close(dfd)
            for off in range(0, 64 << 20, 4096):
                m[off] = 1
            maps.append(m)
            held += 64 << 20
        except OSError as e:
            try:
                why = open(dom + "/mr/" + mid + "/err").read().strip()
            except Exception:
                why = str(e)
            break
    say("held %d MiB%s" % (held >> 20, (": stopped by " + why) if why else ""))
    while time.time() < end:
        time.sleep(1)
EOF
chmod 644 "$W/bin/attacks.py"
attacks=(keys peers fds err mr)
as ffsoakx "$W/bin/soak.sh" --keys "$V" "$rdmV" "$atk_end" >"$W/log/attack-keys" 2>&1 &
pids+=($!)
as ffsoakx "$W/bin/soak.sh" --peers "$L" "$rdmL" "$atk_end" >"$W/log/attack-peers" 2>&1 &
pids+=($!)
as ffsoakx $py "$W/bin/attacks.py" fds "$MNT" "$atk_end" "$pepL" "$rdmL" >"$W/log/attack-fds" 2>&1 &
pids+=($!)
as ffsoakx $py "$W/bin/attacks.py" err "$MNT" "$atk_end" >"$W/log/attack-err" 2>&1 &
pids+=($!)
as ffsoakx $py "$W/bin/attacks.py" mr "$MNT" "$atk_end" >"$W/log/attack-mr" 2>&1 &
pids+=($!)
atk_pids=("${pids[@]: -5}")

# Root's probes: a new RDM endpoint sends to the flooded one; a new
# listener listens; a new region registers.
probe_fail=0 probes=0
probe() {
	local D=$L ok=1 p=probe
	probes=$((probes + 1))
	{
		mkdir "$D/ep/$p" && echo FI_EP_RDM >"$D/ep/$p/attr/type" &&
			echo "bind cq soak send,recv" >"$D/ep/$p/ctl" && echo "bind av soak" >"$D/ep/$p/ctl" &&
			echo enable >"$D/ep/$p/ctl" && echo "insert $rdmL" >"$D/av/soak/ctl" &&
			echo "dest $(($(wc -l <"$D/av/soak/addrs") - 1))" >"$D/ep/$p/ctl" &&
			timeout 10 sh -c "echo probe > $D/ep/$p/data"
	} 2>/dev/null || { ok=0; echo "probe $probes: rdm send: $(cat "$D/ep/$p/err" 2>/dev/null)"; }
	rmdir "$D/ep/$p" 2>/dev/null
	{ mkdir "$D/pep/$p" && echo "bind eq soak" >"$D/pep/$p/ctl" && echo listen >"$D/pep/$p/ctl"; } 2>/dev/null ||
		{ ok=0; echo "probe $probes: listen: $(cat "$D/pep/$p/err" 2>/dev/null)"; }
	rmdir "$D/pep/$p" 2>/dev/null
	{ mkdir "$D/mr/$p" && echo 65536 >"$D/mr/$p/attr/len" && echo reg >"$D/mr/$p/ctl"; } 2>/dev/null ||
		{ ok=0; echo "probe $probes: reg: $(cat "$D/mr/$p/err" 2>/dev/null)"; }
	rmdir "$D/mr/$p" 2>/dev/null
	((ok)) || probe_fail=$((probe_fail + 1))
} >>"$W/log/probes"

# Per-minute report.
minute_stats() { # minute_stats NAME FROM TO: "runs fails mean"
	awk -v a="$2" -v b="$3" '$1 >= a && $1 < b { if ($2 == "ok") { n++; s += $3 } else f++ }
		END { printf "%d %d %s\n", n, f, n ? sprintf("%.0f", s / n) : "-" }' "$W/log/victim-$1" 2>/dev/null || echo "0 0 -"
}
last() { grep -E '^(tries|held|objects|clone|setup)' "$W/log/attack-$1" 2>/dev/null | tail -1 | cut -c1-60; }
rows=()
header="| min | fds | threads | RSS MiB | memfd MiB |"
for v in "${victims[@]}"; do header+=" $v runs/fail/us |"; done
header+=" keys | peers | fds attack | probes failed |"
printf '%s\n' "$header"
minute=0 stopped_ok=1 peak_fds=$base_fds peak_rss=$base_rss peak_shm=$base_shm
t=$start
while (($(date +%s) < end)); do
	next=$((start + (minute + 1) * 60))
	((next > end)) && next=$end
	while (($(date +%s) < next)); do sleep 1; done
	minute=$((minute + 1))
	probe
	f=$(fds) th=$(threads) r=$(rss) m=$(memfd)
	((f > peak_fds)) && peak_fds=$f
	((r > peak_rss)) && peak_rss=$r
	((m > peak_shm)) && peak_shm=$m
	row="| $minute | $f | $th | $((r / 1024)) | $m |"
	for v in "${victims[@]}"; do
		read -r n fl mean < <(minute_stats "$v" "$t" "$next")
		((n == 0 || fl > 0)) && stopped_ok=0
		row+=" $n/$fl/$mean |"
	done
	row+=" $(last keys) | $(last peers) | $(last fds) | $probe_fail/$probes |"
	rows+=("$row")
	printf '%s\n' "$row"
	t=$next
	if ((next >= atk_end)) && ((${#atk_pids[@]})); then
		for p in "${atk_pids[@]}"; do kill "$p" 2>/dev/null; done
		atk_pids=()
		echo "== attackers stopped"
	fi
done

stop_pids
# The daemon's memory goes back to the system as the Go runtime collects
# and returns it: a quiet daemon collects at least every two minutes, so
# wait for that, at most two and a half.
for ((i = 0; i < 30; i++)); do
	sleep 5
	end_fds=$(fds) end_rss=$(rss) end_shm=$(memfd)
	((end_fds <= base_fds + 16 && end_rss <= base_rss + 131072 && end_shm <= base_shm + 16)) && break
done

# Verdicts.
verdicts=()
pass=1
check() { # check OK TEXT
	if (($1)); then verdicts+=("| held | $2 |"); else verdicts+=("| **FAILED** | $2 |"); pass=0; fi
}
hits=$(grep -c '^hit' "$W/log/attack-keys" 2>/dev/null) || hits=0
tries=$(awk '/^tries/{t=$2} END{print t+0}' "$W/log/attack-keys")
now=$(dd if="$V/mr/soak/data" bs=${#secret} count=1 status=none 2>/dev/null)
check "$((hits == 0 && ${#secret} > 0))" "verbs key guessing: $tries guesses from another uid, $hits hits"
check "$([ "$now" = "$secret" ] && echo 1 || echo 0)" "root's region unchanged after the guessing"
check "$((probe_fail == 0))" "root's probes (new RDM peer, listen, reg) during the attacks: $probe_fail of $probes failed"
check "$stopped_ok" "victims' traffic: every minute had runs and no failure"
check "$((end_fds <= base_fds + 16))" "fds back near baseline: $base_fds at start, $peak_fds at peak, $end_fds at the end"
check "$((end_rss <= base_rss + 131072))" "RSS back near baseline (+128 MiB): $((base_rss / 1024)) MiB at start, $((peak_rss / 1024)) at peak, $((end_rss / 1024)) at the end"
check "$((end_shm <= base_shm + 16))" "memfd memory back near baseline: $base_shm MiB at start, $peak_shm at peak, $end_shm at the end"
for a in peers fds err mr; do verdicts+=("| note | $a attack: $(last "$a") |"); done

{
	echo "# fabricfs soak: $(date -u +%Y-%m-%dT%H:%MZ), $secs s, $(uname -r), $(nproc) CPUs"
	echo
	echo "Made by scripts/soak.sh -d $duration: victims ${victims[*]} (users ${users[*]}), attackers keys, peers, fds, err, mr (user ffsoakx) for the first 70% of the time. Latency is microseconds per round trip, the mean of the minute's runs."
	echo
	printf '%s\n' "$header"
	printf '%s\n' "$(echo "$header" | sed 's/[^|]/-/g; s/--*/---/g')"
	printf '%s\n' "${rows[@]}"
	echo
	echo "| verdict | check |"
	echo "|---|---|"
	printf '%s\n' "${verdicts[@]}"
} >"$out"
echo
echo "== summary"
printf '%s\n' "${verdicts[@]}"
echo "== written to $out"
((pass)) && exit 0 || exit 1
