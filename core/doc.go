// Package core is fabricfs's model of libfabric's objects: the fabric, its
// domains, and in each domain the endpoints, passive endpoints, completion
// and event queues, counters, address vectors and memory regions, with
// their bindings, states and ctl verbs. fs shows the model as a file tree;
// the providers (providers/...) implement the transport under it. core
// imports neither (cmd -> fs -> core <- providers); it speaks package fi's
// vocabulary, and docs/design.md describes the design. This is the map.
//
// # What providers use
//
//   - provider.go: the provider interface. Provider offers fi_info entries
//     and opens domains (ProviderDomain), which make endpoints (Endpoint)
//     and passive endpoints (PassiveEndpoint, ConnReq). core calls the
//     provider; the provider reports back through EndpointEvents and
//     PassiveEvents, and finds in the events the owner (Owned, OwnerOf)
//     and where errors that leave an endpoint usable go (AsyncErrors).
//     Optional interfaces of a provider: MemoryRegistrar (domains with
//     FI_MR_LOCAL, FI_MR_PROV_KEY), Poller and FDPoller (endpoints whose
//     progress the engine drives), Options (fi_setopt). An operation is an
//     Op of an OpKind, finished with Op.Complete and a Completion.
//   - bookkeeping.go: what every provider's domain and passive endpoint
//     counts: EPCount (ep_cnt), PendingReqs (unanswered connection
//     requests, at most MaxPendingReqs).
//   - errors.go: Error, the error of core and the providers: an fi.Errno
//     and a sentence (Errorf, WithOp); Code reads the code of any error.
//   - tracepoints.go: the model's lines in the trace log (package
//     core/trace, the tree's /log) and the daemon's log (log/slog);
//     TracePathOf gives a provider the path of the object its events
//     name (Traced), for its own trace lines.
//
// # What fs uses
//
//   - fabric.go: Fabric, the root: New opens every domain of every
//     provider; Infos lists their fi_info entries; the engine's CPUs
//     (SetEngineCPUs) and the shared-memory allocator (Shm, package
//     core/shm) are set here.
//   - object.go: Kind, Object and Domain. An Object is one directory of
//     the tree: its id, owner, err sentence and references (open files,
//     the mkdir pin, bindings); Domain.Create, Lookup and List make and
//     find them. Each kind's Impl gives the object's status and
//     attributes (Attr, one file each) and, for a Linker, its bindings.
//   - record.go: Record, a line of named facts (a status, a CQ or EQ
//     entry) that renders both its text line and its JSON object, and
//     AttrsRecord, an attr/ directory as attr.json.
//   - commands.go: every ctl verb of every kind, in one table; Object.Ctl
//     runs a line written to a ctl file (split by package core/ctl),
//     Usage lists a kind's verbs.
//   - attrs.go: the attribute files made from fi_info: an endpoint's
//     fields, writable only before enable (guarded), and a domain's attr/.
//
// The kinds, one file each, with what fs reads and writes through them:
//
//   - ep.go: EP, an active endpoint: fi_info, bindings (BindCQ, BindEQ,
//     BindAV), state (idle, enabled, connecting, connected...), Enable,
//     Connect, Accept, Reject, Shutdown, SetOpt, status, links and
//     attributes, Close; epEvents turns the provider's connection events
//     into state and EQ entries.
//   - epops.go: the endpoint's operation bookkeeping: posting an Op,
//     delivering its completion to the bound CQ and counter, the list of
//     operations in flight, the pool of ring requests' Ops, fi_cancel.
//   - epdata.go: the shell's data file (WriteData, ReadData: one message
//     per write or read) and its parameters, the ctl verbs dest, tag,
//     src, cqdata and rxbuf.
//   - epcntr.go: operation classes (send, recv, read, write, remote_read,
//     remote_write) and counter bindings (BindCntr).
//   - eprings.go: an enabled endpoint's work rings ep/N/tx and ep/N/rx
//     (docs/abi.md; Ring) and the memory regions their requests use.
//   - engine.go: the engine that consumes every endpoint's work rings:
//     groups of rings, each a goroutine polling them and sleeping in
//     futex_waitv when idle.
//   - rma.go: the ctl verbs write and read (EP.RMA), and the target side of
//     peers' RMA into this daemon's memory regions.
//   - atomics.go: atomic operations (fi_atomic(3)): a domain's
//     fi_query_atomic (QueryAtomic, the query_atomic file), the checks and
//     buffers of atomics from the rings and the ctl verbs atomic,
//     fetch_atomic and compare_atomic, and FI_ATOMIC offered only where a
//     domain takes atomics.
//   - pep.go: PEP, a passive endpoint: Listen, and connection requests
//     turned into endpoints (Next, the listen file).
//   - cq.go: CQ, a completion queue: its ring cq/N/data (Region), the
//     overflow behind it, Read and Wait for the text files.
//   - eq.go: EQ, an event queue (EQEvent); DataText and ParseData print and
//     read connection private data.
//   - cntr.go: Cntr, a counter: Value, Errors, Wait, the ctl verbs add,
//     set, adderr and seterr.
//   - av.go: AV, an address vector (Insert, Remove, Lookup); ParseAddr
//     reads the ADDR arguments of connect, listen and insert.
//   - mr.go: MR, a memory region in shared memory (Register, Region, Key).
//   - queue.go: the blocking FIFO behind CQ and EQ events and a passive
//     endpoint's connections.
//   - stats.go: what objects count (Stats, Object.Stats: operations by
//     kind with size histograms, each kind's counts, a provider
//     endpoint's EndpointStats), the sums of a domain (closed objects
//     kept), a provider, the daemon and a user, the /resources lines
//     (Fabric.Resources) and a device's counters (DeviceCounters).
//
// # Packages under core
//
//   - core/fi: libfabric's vocabulary: fi_info, constants, names, errors,
//     addresses, and fi_getinfo(3) itself (GetInfo, GetInfoText).
//   - core/ctl: the ctl line tokenizer and argument checker.
//   - core/ring: the shared-memory ring ABI (docs/abi.md).
//   - core/shm: the shared memory behind rings and regions and its
//     mapping modes, with the holder processes of symlink mode.
package core
