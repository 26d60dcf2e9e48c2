// Package fs serves the fabricfs file tree with go-fuse: one directory per
// provider, domain and object, over the model in package core.
//
// # The tree
//
// docs/tree.md lists every file; the names are fixed by DESIGN.md. The
// root holds abi_version, info and getinfo and one directory per provider;
// a provider directory holds info and its domains; a domain directory holds
// info, attr/ and one directory per object kind (ep, pep, cq, eq, av, mr,
// cntr). A kind directory holds clone and one directory per object.
//
// The statistics files (stats.go, docs/observability.md): each counting
// object's stats, the sums in a domain's, a provider's and the root's
// stats and in /users/UID.stats, /resources, /metrics in Prometheus's
// text format, and a verbs domain's ports/1/ device counters.
//
// # Lifetimes
//
// Opening any file of an object takes a reference on it (core.Object.Open)
// and releasing the file drops it, so an object made by opening clone lives
// exactly as long as some file of it is open. mkdir pins an object until
// rmdir. Both are the same core object underneath. When an object dies,
// however it ends, the kernel is told to drop its entries of the object's
// directory and files (core.Fabric.Gone), so that it forgets the nodes,
// which hold the object: the name of an object made by clone is never
// looked up again.
//
// # Reads and writes
//
// Every file is opened with FOPEN_DIRECT_IO: the kernel caches nothing, and
// every read is answered fresh. Generated files (status, info, attr values)
// are rendered by each read at offset 0, and later offsets read that
// rendering, so a file kept open gives the current text to pread at 0
// (the provider reads counters so). Queue
// files (cq and eq events, pep listen, ep data) block when read at offset
// 0 and return end of file at a later offset when nothing is pending, so
// that `cat` shows what arrived and ends; with O_NONBLOCK an empty read at
// offset 0 fails with EAGAIN. A blocked read returns EINTR when the reading
// process is interrupted. Queue files are waitable (poll.go): poll(2)
// says POLLIN only when a read at offset 0 would not block, and a waiting
// poll is woken when that changes (with Options.Poll, which the daemon
// sets).
//
// A record or list file F has a JSON view F.json beside it, and a
// directory with attr/ has attr.json (docs/tree.md, "JSON views"): one
// line each, jsonText of a value core gives (a core.Record, a struct with
// json tags, fi.Info), made by objectDir's j for an object's files and
// tree.jsonEntry for the fixed ones; a queue's F.json is the same queue
// read through jsonLines (JSON Lines).
//
// A write to a ctl file is one command. Errors become an errno in exactly
// one place (errno.go); the full sentence goes to the object's err file.
//
// # Permissions
//
// The mount uses allow_other and default_permissions, so the kernel checks
// modes: object directories are 0700 and their files 0600 or 0400, owned by
// the uid that created the object; kind directories are 01777 like /tmp;
// everything else is world-readable.
package fs
