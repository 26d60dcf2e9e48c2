#!/usr/bin/env bash
# Builds fabricfs and mounts it in the foreground (default /fabric).
# Stop it with Ctrl-C or SIGTERM; the tree is unmounted on the way out.
set -euo pipefail
cd "$(dirname "$0")/.."
mnt=${1:-/fabric}
scripts/deps.sh
export PATH=$PATH:/usr/local/go/bin
mkdir -p bin "$mnt"
# The version -version and /version show: git describe of this checkout.
go build -ldflags "-X github.com/fabricfs/fabricfs/core.version=$(git describe --always --dirty 2>/dev/null || echo devel)" -o bin/fabricfs ./cmd/fabricfs
exec bin/fabricfs "$mnt"
