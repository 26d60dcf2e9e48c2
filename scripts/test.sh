#!/usr/bin/env bash
# Runs every test: unit, fuzz seed corpora, and the end-to-end tests that
# mount the tree, all with the race detector. Extra arguments go to that go
# test (e.g. -run Shell -v). Then, without the race detector, the tests
# that scale their volume down under it run again at full volume: the
# verbs device's fault-injection test (100,000 messages, 1 GiB of RDMA
# writes and reads over links that drop, duplicate, reorder and corrupt).
# Last, also only without arguments, libfabric's own test suite, fabtests,
# judges libfabric's tcp provider and the fabricfs provider side by side
# (scripts/fabtests.sh, docs/fabtests.md; scripts/fabtests.known lists the
# failures it expects, with their reasons).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH=$PATH:/usr/local/go/bin
go test -race -count=1 -timeout 20m "$@" ./...
if [ $# -eq 0 ]; then
	echo "== full-volume tests without the race detector"
	go test -count=1 -timeout 10m -run '^TestFaults$' -v ./providers/verbs/ibv/ | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|done after|fault_test' 
	echo "== fabtests: libfabric's tcp, and the fabricfs provider on the tree's tcp/lo and verbs domains, in one run"
	scripts/fabtests.sh -p tcp -p fabricfs -d tcp/lo -p fabricfs -d verbs/rxe_127_0_0_1 -p fabricfs -d verbs/rxe_127_0_0_1-dgram
fi
