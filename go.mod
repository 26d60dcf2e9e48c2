module github.com/fabricfs/fabricfs

go 1.26.8

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	golang.org/x/sys v0.49.0
)

// go-fuse with FUSE poll support (patches/go-fuse-poll.patch), which
// scripts/gofuse.sh (run by scripts/deps.sh) makes outside git.
replace github.com/hanwen/go-fuse/v2 => ./build/go-fuse
