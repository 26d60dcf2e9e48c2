#!/usr/bin/env bash
# Builds the fabricfs libfabric provider (provider/*.c, over the ring ABI of
# clients/c/fabricfs.h) into bin/libfabricfs-fi.so, the name libfabric 1.17
# looks for in FI_PROVIDER_PATH: run libfabric programs with
#	FI_PROVIDER_PATH=$PWD/bin FI_PROVIDER=fabricfs fi_pingpong ...
# (docs/provider.md). Extra arguments go to the compiler (e.g. -g -O0).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
out=bin/libfabricfs-fi.so
# Rebuild only when a source is newer than the library.
if [ -e "$out" ] && [ $# -eq 0 ] && [ -z "$(find provider clients/c/fabricfs.h scripts/provider.sh -newer "$out" -print -quit)" ]; then
	exit 0
fi
${CC:-cc} -std=gnu11 -O2 -g -fPIC -shared -fvisibility=hidden \
	-Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers \
	-I clients/c -o "$out.tmp" provider/*.c -lfabric -lpthread "$@"
mv "$out.tmp" "$out"
