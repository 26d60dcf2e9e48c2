// Package rxm layers FI_EP_RDM endpoints over a provider of FI_EP_MSG
// endpoints, as libfabric 1.17's rxm utility provider does over its tcp
// provider ("tcp;ofi_rxm"), with the same wire (docs/rxm.md; the bytes are
// package wire), so that fabricfs RDM endpoints and C programs linked
// with libfabric talk to each other.
//
// Wrap(p) returns p with FI_EP_RDM added: the same name and domains, p's
// fi_info entries followed by an FI_EP_RDM entry for each FI_EP_MSG one
// (prov_name "tcp;ofi_rxm"), and endpoints of that type made here. An RDM
// endpoint listens with a passive endpoint of p on its source address; its
// name is the listening address, which peers insert into their AVs. It
// opens one MSG connection per peer, when it first sends to it, and takes
// the connections peers open to it; each carries both directions.
// Crossing connect requests are settled as libfabric settles them (the
// request of the endpoint with the greater address wins).
//
// A peer is kept while it has a connection or sends waiting for one, and
// forgotten after (its slot is reused); at most MaxPeers peers, at most
// MaxPeersPerHost of one remote host (an IPv4 address, an IPv6 /64), or
// of one user of this host (core.HostOf). A
// connection with nothing waiting to be sent and no operation in flight
// either way is shut down when it has carried no message ConnIdleTimeout
// after it came up, or has been quiet for UsedIdleTimeout since its last
// one: rxm connects again when either side sends, so closing loses
// nothing, and one message no longer keeps a peer's slot for ever.
// Connections are charged to the endpoint's owner through the wrapped
// provider (core.Connections): those it opens from their connect, those
// peers open from when the endpoint accepts them (the wrapped provider's
// handshakes and pending requests are bounded per listener, not
// charged). A connection starts with two
// receive buffers, gains one per message received, up to bufsPerConn, and
// gives back all but two when it has been quiet for half ConnIdleTimeout.
//
// What is implemented: FI_MSG and FI_TAGGED sends and receives, eager up
// to EagerLimit (16384) bytes and by the read rendezvous above it (rndv.go),
// the segmented messages of peers without dynamic receive buffers
// received (sar.go; fabricfs sends the rendezvous instead), remote CQ data, inject, tag matching with ignore bits, unexpected
// messages (kept, up to UnexpectedLimit bytes per endpoint, then the
// connections wait), FI_DIRECTED_RECV (Op.Peer of a receive), FI_SOURCE
// (Completion.Src: the sender's listening address as its connect request
// announced it), FI_MULTI_RECV, FI_RMA: writes and reads go unchanged
// to the peer's MSG connection, and peers' RMA on the endpoint's memory
// is resolved and reported through its events (rma.go), and FI_ATOMIC:
// fi_atomic, fi_fetch_atomic and fi_compare_atomic as rxm's request and
// response messages, both ways, for every op/datatype pair libfabric's rxm
// takes, applied at the target by package core/atomic (atomic.go); the
// domain answers fi_query_atomic (core.Atomics).
//
// Sends always carry the rxm header, also tagged ones (op tagged), which
// every 1.17 peer accepts; received tagged messages come in either form.
// Bytes from peers are validated by package wire; a malformed message
// closes that connection only, and the reason goes to the endpoint's err
// file (core.AsyncErrors).
package rxm
