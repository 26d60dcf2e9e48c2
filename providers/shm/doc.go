// Package shm is the provider of endpoints that talk only to endpoints of
// the same daemon, as libfabric's shm provider talks only to processes of
// the same host: FI_EP_RDM with FI_LOCAL_COMM, one domain "shm", and
// endpoints named by FI_ADDR_STR addresses of libfabric's shm forms,
// fi_shm://NAME and fi_ns://NODE:SERVICE (fi.ParseAddr, fi.Addr.IsName).
//
// No socket is involved. Every operation is done inside Post, on the
// poster's goroutine (the engine's, for a ring): a send finds the target
// endpoint by name in the provider's table, takes the first matching
// posted receive and copies the payload once, from the sender's buffer
// (the daemon-mapped region the work request names) straight into the
// receive buffer (the receiver's region), then completes both; a write,
// read or atomic works on the target's region, found and checked by the
// target's core.EndpointEvents.Region, as for a peer over tcp (atomics
// by package core/atomic). Since each operation is done before Post
// returns, the operations of one endpoint are placed in the order they
// are posted, whatever their kinds.
//
// What is implemented: FI_MSG and FI_TAGGED sends and receives (tag
// matching with ignore bits, FI_DIRECTED_RECV, FI_SOURCE, remote CQ data,
// inject, receives without a buffer, truncation with FI_ETRUNC, cancel,
// FI_PEEK, FI_CLAIM and FI_DISCARD, FI_MULTI_RECV with
// FI_OPT_MIN_MULTI_RECV), unexpected messages kept up
// to UnexpectedLimit bytes per endpoint, FI_RMA writes and reads and
// FI_ATOMIC operations with peers' RMA and atomics reported through the
// target's events (FI_RMA_EVENT). A send to a name no enabled endpoint
// has completes with FI_EHOSTUNREACH.
//
// Names: an endpoint takes the name its fi_info's src_addr gives (core's
// setname before enable: fi_setname's, or what fi_getinfo made of a node
// and service with FI_SOURCE, fi_ns://NODE:SERVICE), so that a peer that
// inserts that string into its AV reaches it; with the entry's own
// src_addr, fi_shm://fabricfs, the tree names it fi_shm://fabricfs.N.
// Names are the daemon's, as libfabric's shm names are the host's
// (/dev/shm): the first endpoint enabled with a name has it until it
// closes, whoever owns it, and another endpoint enabled with it fails
// with FI_EADDRINUSE.
//
// Security: as over loopback TCP, where any local user may connect to any
// listener (or bind a port another user's program expects), an endpoint
// takes messages from every endpoint of the provider, whoever owns it;
// memory is reached only by key, and the target's events resolve a key to
// the target owner's regions alone. What an endpoint holds for its peers
// is bounded: UnexpectedLimit bytes of unexpected messages (a send beyond
// that waits at the sender: Post returns FI_EAGAIN, and core posts it
// again later), rx_size posted receives.
package shm
