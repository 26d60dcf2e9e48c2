// Package shm is the provider of endpoints that talk only to endpoints of
// the same daemon, as libfabric's shm provider talks only to processes of
// the same host: FI_EP_RDM with FI_LOCAL_COMM, one domain "shm", and
// endpoints named by FI_ADDR_STR addresses of libfabric's shm form,
// fi_shm://NAME (fi.ParseAddr).
//
// No socket is involved. Every operation is done inside Post, on the
// poster's goroutine (the engine's, for a ring): a send finds the target
// endpoint by name in the provider's table, takes the first matching
// posted receive and copies the payload once, from the sender's buffer
// (the daemon-mapped region the work request names) straight into the
// receive buffer (the receiver's region), then completes both; a write or
// read copies between the initiator's buffer and the target's region,
// found and checked by the target's core.EndpointEvents.Region, as for a
// peer over tcp. Since each operation is done before Post returns, the
// operations of one endpoint are placed in the order they are posted,
// whatever their kinds.
//
// What is implemented: FI_MSG and FI_TAGGED sends and receives (tag
// matching with ignore bits, FI_DIRECTED_RECV, FI_SOURCE, remote CQ data,
// inject, receives without a buffer, truncation with FI_ETRUNC, cancel),
// unexpected messages kept up to UnexpectedLimit bytes per endpoint, and
// FI_RMA writes and reads with peers' RMA reported through the target's
// events (FI_RMA_EVENT). A send to a name no enabled endpoint has
// completes with FI_EHOSTUNREACH.
//
// Security: as over loopback TCP, where any local user may connect to any
// listener, an endpoint takes messages from every endpoint of the
// provider, whoever owns it; memory is reached only by key, and the
// target's events resolve a key to the target owner's regions alone.
// What an endpoint holds for its peers is bounded: UnexpectedLimit bytes
// of unexpected messages (a send beyond that waits at the sender: Post
// returns FI_EAGAIN, and core posts it again later), rx_size posted
// receives.
package shm
