module github.com/fabricfs/fabricfs

go 1.26.8

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	golang.org/x/sys v0.49.0
)
