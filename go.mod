module github.com/fabricfs/fabricfs

go 1.26.8

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/prometheus/client_model v0.6.3
	golang.org/x/sys v0.49.0
)

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	github.com/prometheus/common v0.73.1
	google.golang.org/protobuf v1.36.12 // indirect
)

// go-fuse with FUSE poll support (patches/go-fuse-poll.patch), which
// scripts/gofuse.sh (run by scripts/deps.sh) makes outside git.
replace github.com/hanwen/go-fuse/v2 => ./build/go-fuse
