#!/usr/bin/env bash
# Makes build/go-fuse: go-fuse v2.12.1 (the module go.mod requires) with
# patches/go-fuse-poll.patch applied, which go.mod's replace directive
# builds against. The patch adds what the tree's waitable files need and
# go-fuse lacks: answering FUSE_POLL and sending FUSE_NOTIFY_POLL
# (docs/design.md, "Waitable files"); it is written as a change for
# go-fuse upstream. build/ is outside git; the copy is made again
# whenever the patch changes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
mod=github.com/hanwen/go-fuse/v2
version=$(sed -n "s|^[[:space:]]*${mod//./\\.} \(v[^ ]*\)$|\1|p" go.mod)
[ -n "$version" ] || { echo "gofuse: go.mod does not require $mod" >&2; exit 1; }
patchfile=patches/go-fuse-poll.patch
dst=build/go-fuse
stamp="$version $(sha256sum "$patchfile" | cut -d' ' -f1)"
if [ "$(cat "$dst/.fabricfs-patch" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
# Download outside the module: go.mod's replace hides the module from
# go mod download inside it.
src=$(cd / && go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "gofuse: go mod download $mod@$version gave no directory" >&2; exit 1; }
rm -rf "$dst" "$dst.tmp"
mkdir -p build
cp -r "$src" "$dst.tmp"
chmod -R u+w "$dst.tmp"
patch -s -p1 -d "$dst.tmp" < "$patchfile"
echo "$stamp" > "$dst.tmp/.fabricfs-patch"
mv "$dst.tmp" "$dst"
echo "gofuse: $dst is $mod $version with $patchfile" >&2
