#!/usr/bin/env bash
# Installs what fabricfs and its tests need on a fresh Debian machine:
# fuse3 (fusermount3, /etc/fuse.conf), libfabric-bin (the real fi_info and
# fi_pingpong to compare against), libfabric-dev (headers for the
# constant checks and C interop programs), libibverbs-dev (verbs.h, for
# providers/verbs/ibv's constant check), gcc and python3 (the C and
# Python ring clients, the independent ICRC check), tshark (dissects the
# RoCEv2 packets of providers/verbs/roce and ibv in their capture tests),
# iproute2 and util-linux (ip and nsenter: the tests' network namespaces;
# setsid: scripts/fabtests.sh's process groups), autoconf, automake,
# libtool and make (scripts/fabtests.sh builds libfabric's fabtests with
# its autogen.sh, configure and make), openmpi-bin and libopenmpi-dev
# (mpirun and mpicc: an Open MPI program over the fabricfs provider,
# tests/provider_mpi_test.go), patch (scripts/gofuse.sh, which it runs
# last: the patched go-fuse the build uses), python3-yaml and
# python3-matplotlib (scripts/bench.sh's YAML check and PNG plots).
set -euo pipefail
pkgs=(fuse3 libfabric-bin libfabric-dev libibverbs-dev gcc python3 tshark iproute2 util-linux autoconf automake libtool make openmpi-bin libopenmpi-dev patch)
# groff-base (groff: internal/manpage's test renders the man pages) and
# systemd (systemd-analyze: tests/systemd_test.go verifies the unit).
pkgs+=(groff-base systemd)
# python3-yaml and python3-matplotlib: scripts/bench_report.py and
# bench_plot.py (bench.sh's YAML and PNG outputs, tests/bench_test.go).
pkgs+=(python3-yaml python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}" >&2
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	# wireshark-common asks whether non-root users may capture; answer no
	# (tests capture as root) so the install never prompts.
	echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ -e /dev/fuse ] || { echo "deps: /dev/fuse is missing: load the fuse module (modprobe fuse)" >&2; exit 1; }
"$(dirname "$0")/gofuse.sh"
