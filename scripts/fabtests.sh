#!/usr/bin/env bash
# Builds libfabric's fabtests and runs its test sets on loopback, for each
# provider given, as fabtests' own scripts/runfabtests.sh would, but ending
# only the processes it started (by process group), never by name.
#
#	scripts/fabtests.sh [-p PROVIDER [-d DOMAIN]]... [SET]...
#	scripts/fabtests.sh build
#
# PROVIDER defaults to tcp; SETs (unit, functional, short, standard) default
# to "unit functional short". "build" only builds them (build/fabtests/
# install/bin, for scripts/bench.sh's streaming pass) and runs nothing. docs/fabtests.md describes the output, the
# known failures (scripts/fabtests.known), the timeout and the exit status.
#
# Environment: FABTESTS_SRC, the fabtests tarball (default
# ../shared/fabtests-1.17.1.tar.gz beside the repository; absent: skip);
# FABTESTS_TIMEOUT, seconds a test may take (default 60); FABTESTS_ONLY, a
# regular expression choosing the tests to run; FI_FABRICFS_ROOT,
# a mounted tree for -p fabricfs (default: a fresh mount of bin/fabricfs).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# Exit statuses that make fabtests count a test as not run (runfabtests.sh's
# notrun rule): fabtests programs exit with the absolute value of their
# libfabric error, and FI_ENODATA and FI_ENOSYS are Linux's ENODATA and
# ENOSYS (rdma/fi_errno.h).
readonly FI_ENODATA=61 FI_ENOSYS=38

usage() {
	echo "usage: scripts/fabtests.sh [-p PROVIDER [-d DOMAIN]]... [unit|functional|short|standard]..." >&2
	echo "       scripts/fabtests.sh build" >&2
	exit 2
}

provs=() doms=() sets=() build_only=0
if [ "${1:-}" = build ]; then
	[ $# -eq 1 ] || usage
	build_only=1
	shift
fi
while [ $# -gt 0 ]; do
	case $1 in
	-p)
		[ $# -ge 2 ] || usage
		provs+=("$2") doms+=("")
		shift 2
		;;
	-d)
		if [ $# -lt 2 ] || [ ${#provs[@]} -eq 0 ]; then usage; fi
		doms[-1]=$2
		shift 2
		;;
	unit | functional | short | standard)
		sets+=("$1")
		shift
		;;
	*) usage ;;
	esac
done
[ ${#provs[@]} -gt 0 ] || provs=(tcp) doms=("")
[ ${#sets[@]} -gt 0 ] || sets=(unit functional short)
timeout=${FABTESTS_TIMEOUT:-60}
[[ $timeout =~ ^[1-9][0-9]*$ ]] || { echo "fabtests: FABTESTS_TIMEOUT=$timeout is not a number of seconds" >&2; exit 2; }

src=${FABTESTS_SRC:-$repo/../shared/fabtests-1.17.1.tar.gz}
if [ ! -f "$src" ]; then
	echo "fabtests: skipped: no fabtests tarball at $src (set FABTESTS_SRC)"
	exit 0
fi

# Processes this script started and has not reaped yet: each one leads a
# process group of its own (setsid), which cleanup ends whole.
groups=()
daemon="" mnt=""
cleanup() {
	set +e
	local g
	for g in "${groups[@]}"; do
		kill -KILL -- "-$g" "$g" 2>/dev/null
		wait "$g" 2>/dev/null
	done
	if [ -n "$daemon" ]; then
		# SIGTERM makes the daemon unmount and close its objects.
		kill -TERM "$daemon" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$daemon" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$daemon" 2>/dev/null
		wait "$daemon" 2>/dev/null
		mountpoint -q "$mnt" && fusermount3 -uz "$mnt"
		rmdir "$mnt"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Build: into build/fabtests, again only when the tarball changes.
build=$repo/build/fabtests
bin=$build/install/bin
sum=$(sha256sum "$src" | cut -d' ' -f1)
if [ "$(cat "$build/stamp" 2>/dev/null)" != "$sum" ]; then
	rm -rf "$build"
	mkdir -p "$build/src"
	log=$build/build.log
	# phase NAME CMD...: runs one build step in build/fabtests/src, its
	# output in the build log; on failure shows the log's tail and exits.
	phase() {
		echo "fabtests: build: $1"
		local name=$1
		shift
		if ! (cd "$build/src" && "$@") >>"$log" 2>&1; then
			echo "fabtests: build: $name failed; the last lines of $log:" >&2
			tail -n 40 "$log" >&2
			exit 1
		fi
	}
	phase unpack tar -xzf "$src" --strip-components=1
	phase autogen ./autogen.sh
	phase configure ./configure --prefix="$build/install"
	phase make make -j2
	phase install make install
	echo "$sum" >"$build/stamp"
fi
[ $build_only -eq 0 ] || exit 0

# --- The tests of each set, read from the unpacked runfabtests.sh's arrays
# (unit: unit_tests and neg_unit_tests; the others: SET_tests), so they
# follow the tarball. Each element is one quoted string on a line of its
# own; anything else there is reported rather than guessed at. The unit
# tests' GOOD_ADDR and SERVER_ADDR become 127.0.0.1, as runfabtests.sh
# substitutes them with the server's address.
rft=$build/src/scripts/runfabtests.sh
array() {
	awk -v name="$1" '
		$0 ~ "^" name "=\\($" { inside = 1; next }
		inside && /^\)/ { found = 1; exit }
		inside && /^[ \t]*"[^"]+"[ \t]*$/ { gsub(/^[ \t]*"|"[ \t]*$/, ""); print; next }
		inside { bad = 1; exit }
		END { exit !(found && !bad) }' "$rft"
}
declare -A kind # test -> unit, neg (a negative unit test) or cs
tests=()
for set in "${sets[@]}"; do
	names=("${set}_tests")
	[ "$set" = unit ] && names+=(neg_unit_tests)
	for name in "${names[@]}"; do
		list=$(array "$name") || { echo "fabtests: $rft: no array $name of one quoted test per line" >&2; exit 1; }
		while IFS= read -r t; do
			t=${t//GOOD_ADDR/127.0.0.1}
			t=${t//SERVER_ADDR/127.0.0.1}
			case $name in
			unit_tests) kind[$t]=unit ;;
			neg_unit_tests) kind[$t]=neg ;;
			*) kind[$t]=cs ;;
			esac
			tests+=("$t")
		done <<<"$list"
	done
done

# FABTESTS_ONLY, a bash regular expression, keeps only the tests it
# matches (fi_rdm_atomic, "^fi_shared_ctx -e msg"), to run a few alone.
if [ -n "${FABTESTS_ONLY:-}" ]; then
	only=()
	for t in "${tests[@]}"; do
		[[ $t =~ $FABTESTS_ONLY ]] && only+=("$t")
	done
	[ ${#only[@]} -gt 0 ] || { echo "fabtests: FABTESTS_ONLY=$FABTESTS_ONLY matches no test of ${sets[*]}" >&2; exit 2; }
	tests=("${only[@]}")
fi

# --- Known failures: "LABEL | TEST | REASON" lines (see the file's top).
knownfile=$repo/scripts/fabtests.known
declare -A known
n=0
while IFS= read -r line || [ -n "$line" ]; do
	n=$((n + 1))
	[[ $line =~ ^[[:space:]]*(#|$) ]] && continue
	if ! [[ $line =~ ^[[:space:]]*([^|]*[^|[:space:]])[[:space:]]*\|[[:space:]]*([^|]*[^|[:space:]])[[:space:]]*\|[[:space:]]*([^|]*[^|[:space:]])[[:space:]]*$ ]]; then
		echo "fabtests: $knownfile:$n: want LABEL | TEST | REASON, have: $line" >&2
		exit 2
	fi
	known["${BASH_REMATCH[1]}|${BASH_REMATCH[2]}"]=${BASH_REMATCH[3]}
done <"$knownfile"

# --- Processes. start LOG CMD...: runs CMD in a new session, so a process
# group of its own whose number is its pid, output to LOG; sets pid.
start() {
	local log=$1
	shift
	setsid "$@" </dev/null >"$log" 2>&1 &
	pid=$!
	groups+=("$pid")
}

# exited PID: whether PID has exited. Until reap collects it, it is a
# zombie, so its pid, and the number of its process group, stay ours.
exited() {
	local stat
	{ read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 0
	stat=${stat##*) }
	[ "${stat%% *}" = Z ]
}

# tick: sets us to the time in microseconds (without a subshell, as
# await calls it twenty times a second).
tick() {
	us=${EPOCHREALTIME/[.,]/}
}

# await PID UNTIL: waits for PID to exit until the time (tick) is UNTIL;
# false if it is still running then.
await() {
	until exited "$1"; do
		tick
		[ "$us" -lt "$2" ] || return 1
		sleep 0.05
	done
}

# reap PID: ends whatever is left of PID's process group, then collects
# PID's exit status into rc (128+N when signal N ended it).
reap() {
	kill -KILL -- "-$1" 2>/dev/null || true
	rc=0
	# (2>/dev/null: bash's "Killed" notice for a killed job)
	wait "$1" 2>/dev/null || rc=$?
	local g rest=()
	for g in "${groups[@]}"; do
		[ "$g" = "$1" ] || rest+=("$g")
	done
	groups=("${rest[@]}")
}

# run TEST: runs one test as runfabtests.sh does and sets result (pass,
# FAIL or notrun), timedout and the log of both sides (in $log).
# Unit tests are one process; negative ones pass when they exit with
# FI_ENODATA. Client/server tests: the server (-s 127.0.0.1) starts first,
# the client (-s 127.0.0.1 127.0.0.1) one second later, as runfabtests.sh
# waits; when the client fails the server gets two more seconds. The whole
# test has $timeout seconds; then both sides are killed.
run() {
	local test=$1 k=${kind[$1]} s c s_rc c_rc limit
	local -a args
	read -ra args <<<"$test"
	args=("$bin/${args[0]}" "${args[@]:1}" -p "$prov")
	[ -z "$dom" ] || args+=(-d "$dom")
	tick
	local deadline=$((us + timeout * 1000000))
	timedout=0
	if [ "$k" != cs ]; then
		start "$log.out" env "${penv[@]}" "${args[@]}"
		s=$pid
		await "$s" "$deadline" || timedout=1
		reap "$s"
		{
			echo "# ${penv[*]:+${penv[*]} }${args[*]}"
			cat "$log.out"
			echo "# exit status $rc"
		} >"$log"
		rm -f "$log.out"
		if [ "$timedout" = 1 ]; then
			result=FAIL
		elif [ "$k" = neg ]; then
			[ "$rc" = "$FI_ENODATA" ] && result=pass || result=FAIL
		elif [ "$rc" = "$FI_ENODATA" ] || [ "$rc" = "$FI_ENOSYS" ]; then
			result=notrun
		elif [ "$rc" != 0 ]; then
			result=FAIL
		else
			result=pass
		fi
		return
	fi
	start "$log.server" env "${penv[@]}" "${args[@]}" -s 127.0.0.1
	s=$pid
	sleep 1
	start "$log.client" env "${penv[@]}" "${args[@]}" -s 127.0.0.1 127.0.0.1
	c=$pid
	await "$c" "$deadline" || timedout=1
	reap "$c"
	c_rc=$rc
	tick
	limit=$deadline
	if [ "$timedout" = 1 ]; then
		limit=0
	elif [ "$c_rc" != 0 ] && [ $((us + 2000000)) -lt "$deadline" ]; then
		limit=$((us + 2000000))
	fi
	# A server that outlives a failed client by two seconds is a failure
	# already; only one that outlives a passing client is a hang.
	await "$s" "$limit" || [ "$c_rc" != 0 ] || timedout=1
	reap "$s"
	s_rc=$rc
	{
		echo "# server: ${penv[*]:+${penv[*]} }${args[*]} -s 127.0.0.1"
		cat "$log.server"
		echo "# server exit status $s_rc"
		echo "# client: ${penv[*]:+${penv[*]} }${args[*]} -s 127.0.0.1 127.0.0.1"
		cat "$log.client"
		echo "# client exit status $c_rc"
	} >"$log"
	rm -f "$log.server" "$log.client"
	if [ "$timedout" = 1 ]; then
		result=FAIL
	elif { [ "$s_rc" = "$FI_ENODATA" ] && [ "$c_rc" = "$FI_ENODATA" ]; } ||
		{ [ "$s_rc" = "$FI_ENOSYS" ] && [ "$c_rc" = "$FI_ENOSYS" ]; }; then
		result=notrun
	elif [ "$s_rc" != 0 ] || [ "$c_rc" != 0 ]; then
		result=FAIL
	else
		result=pass
	fi
}

# fabricfs_env: sets penv for -p fabricfs: builds the provider and, unless
# FI_FABRICFS_ROOT names a mounted tree, mounts a fresh one (once for all
# -p fabricfs). With -d, FI_FABRICFS_DOMAIN names the domain too, so that
# fi_getinfo without hints lists that domain alone, as it would list a
# libfabric provider's only device (fi_getinfo_test's caps4 asks for the
# caps of the first entry without hints, then for them with -d). False,
# after saying why, when there is no provider to build.
ffs_env=()
fabricfs_env() {
	if [ ${#ffs_env[@]} -eq 0 ]; then
		if [ ! -x scripts/provider.sh ]; then
			echo "fabtests $label: skipped: scripts/provider.sh does not exist, so the provider is not built"
			return 1
		fi
		echo "fabtests $label: building the provider (scripts/provider.sh)"
		scripts/provider.sh || { echo "fabtests $label: scripts/provider.sh failed" >&2; exit 1; }
		if ! { [ -n "${FI_FABRICFS_ROOT:-}" ] && mountpoint -q "$FI_FABRICFS_ROOT"; }; then
			mount_fabricfs
			FI_FABRICFS_ROOT=$mnt
		fi
		ffs_env=(FI_PROVIDER_PATH="$repo/bin" FI_FABRICFS_ROOT="$FI_FABRICFS_ROOT")
	fi
	penv=("${ffs_env[@]}")
	[ -z "$dom" ] || penv+=(FI_FABRICFS_DOMAIN="$dom")
}

# mount_fabricfs: builds bin/fabricfs and mounts it on a new directory,
# mnt, its daemon (its own process group) in daemon, for cleanup to end.
# The daemon's one verbs device is 127.0.0.1 (verbs/rxe_127_0_0_1) on a
# RoCE port nothing uses now: on the default port, taken by any other
# fabricfs of the host, the daemon would leave the device out and every
# verbs test would find no entry (-FI_ENODATA).
mount_fabricfs() {
	scripts/gofuse.sh && PATH=$PATH:/usr/local/go/bin go build -o bin/fabricfs ./cmd/fabricfs || exit 1
	local port
	port=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || exit 1
	mnt=$(mktemp -d /tmp/fabtests-fabricfs.XXXXXX) || exit 1
	echo "fabtests $label: mounting bin/fabricfs on $mnt (RoCE port $port)"
	setsid bin/fabricfs -verbs-addrs 127.0.0.1 -roce-port "$port" "$mnt" </dev/null >"$build/fabricfs.log" 2>&1 &
	daemon=$!
	local i
	for i in $(seq 100); do
		mountpoint -q "$mnt" && return
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.1
	done
	echo "fabtests $label: bin/fabricfs did not mount $mnt; the end of its log, $build/fabricfs.log:" >&2
	tail -n 20 "$build/fabricfs.log" >&2
	exit 1
}

# --- Run each provider's tests.
status=0
for i in "${!provs[@]}"; do
	prov=${provs[$i]} dom=${doms[$i]}
	label=$prov${dom:+/$dom}
	penv=()
	if [ "$prov" = fabricfs ]; then
		fabricfs_env || continue
	fi
	results=$repo/build/fabtests-results/${label//[^A-Za-z0-9._-]/_}
	rm -rf "$results"
	mkdir -p "$results"
	passed=0 failed=0 notrun=0 differ=()
	for t in "${tests[@]}"; do
		log=$results/$(printf '%03d' $((passed + failed + notrun + 1)))-${t//[^A-Za-z0-9._-]/_}.log
		tick
		t0=$us
		run "$t"
		tick
		dt=$(((us - t0) / 100000))
		line="$result $label $t ($((dt / 10)).$((dt % 10))s)"
		[ "$timedout" = 0 ] || line+=" (timeout)"
		[ "$result" != FAIL ] || line+=" ${log#"$repo"/}"
		reason=${known["$label|$t"]:-}
		if [ -n "$reason" ]; then
			if [ "$result" = FAIL ]; then
				line+=" known: $reason"
			elif [[ $reason == racy:* ]]; then
				line+=" (listed in scripts/fabtests.known as racy: may fail)"
			else
				line+=" (listed in scripts/fabtests.known as failing)"
				differ+=("$t")
			fi
		elif [ "$result" = FAIL ]; then
			differ+=("$t")
		fi
		echo "$line"
		case $result in
		pass) passed=$((passed + 1)) ;;
		FAIL) failed=$((failed + 1)) ;;
		notrun) notrun=$((notrun + 1)) ;;
		esac
	done
	for t in "${differ[@]}"; do
		echo "fabtests $label: not as scripts/fabtests.known says: $t"
		status=1
	done
	echo "fabtests $label (${sets[*]}): $passed passed, $failed failed, $notrun notrun"
done
exit $status
