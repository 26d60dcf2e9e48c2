#!/usr/bin/env bash
# Runs every test: unit, fuzz seed corpora, and the end-to-end tests that
# mount the tree. Extra arguments go to go test (e.g. -run Shell -v).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH=$PATH:/usr/local/go/bin
go test -race -count=1 -timeout 20m "$@" ./...
