#!/usr/bin/env bash
# Builds fabricfs and mounts it in the foreground (default /fabric).
# Stop it with Ctrl-C or SIGTERM; the tree is unmounted on the way out.
set -euo pipefail
cd "$(dirname "$0")/.."
mnt=${1:-/fabric}
scripts/deps.sh
export PATH=$PATH:/usr/local/go/bin
mkdir -p bin "$mnt"
go build -o bin/fabricfs ./cmd/fabricfs
exec bin/fabricfs "$mnt"
