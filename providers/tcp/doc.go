// Package tcp is fabricfs's tcp provider: FI_EP_MSG endpoints over TCP
// sockets that speak libfabric 1.17's tcp provider wire format, so a
// fabricfs endpoint and a C program linked with libfabric connect to each
// other and exchange messages.
//
// New returns the provider with its settings (Config: the interfaces,
// listeners' port range, connect and CM timeouts and TCP keepalive, which
// libfabric's tcp provider takes from FI_TCP_* variables and the daemon
// from its flags). Its domains are the host's network interfaces, named as
// libfabric names them; the exported constants are its limits.
//
// # Domains and fi_info
//
// There is one fi_info per interface address, built by libfabric's own
// rules (ofi_get_list_of_addr and util_getinfo_ifs in libfabric's
// src/common.c and prov/util/src/util_main.c): interfaces that are up and
// running and not loopback, sorted by link speed, IPv4 before IPv6, and
// equal ones in reverse kernel order; then always "lo" with 127.0.0.1 and
// ::1. The fabric name is the network: the address masked with its netmask
// and the netmask's bit count ("192.0.2.0/24", "fd00::/64"), except that
// loopback is always "127.0.0.1/32" and "::1/128", whatever lo's real
// netmask, because libfabric adds those two entries itself. Loopback
// entries offer FI_LOCAL_COMM and not FI_REMOTE_COMM.
//
// Attribute values are those `fi_info -v -p tcp -t FI_EP_MSG` prints where
// fabricfs behaves the same way (sizes, ordering, progress, threading, CQ
// data size...). Capabilities are only what is implemented: FI_MSG,
// FI_SEND, FI_RECV, FI_LOCAL_COMM, FI_REMOTE_COMM. iov_limit is 1 because a
// core.Op carries one buffer; rma_iov_limit is 0 until RMA exists.
// max_ep_stx_ctx and max_ep_srx_ctx count core's shared contexts
// (core.SharedCtxEPs), which libfabric's tcp has for receives only. The
// ordering bits are libfabric's TCPX_MSG_ORDER: a connection is one TCP
// stream whose messages the receiver handles in order, so they hold for
// every operation. prov_version is fabricfs's own, 1.0.
//
// # Wire format
//
// Package wire holds the encoders and decoders. After connect the active
// side sends one CM message (a 32-byte ofi_ctrl_hdr and up to 256 bytes of
// private data, in one write) and the passive side answers with one accept
// or reject. Then each message is a data header and its payload. fabricfs
// writes little-endian, as x86-64 and arm64 libfabric peers do, and refuses
// a peer whose byte-order probe says otherwise. Headers carry a
// per-connection sequence in their id byte, as libfabric's debug builds
// require. Everything a peer sends is validated; a malformed message ends
// that connection with an error wrapping fi.EIO, and never panics.
//
// Delivery complete: a send with fi.TRANSMIT_COMPLETE or
// fi.DELIVERY_COMPLETE (or fi.COMMIT_COMPLETE) sets the header flag that
// asks the peer to acknowledge, and completes when the ACK arrives; ACKs
// match pending sends first in, first out. A received message that asks
// for an ACK gets one once it is placed, and only then: a C peer crashes on
// an ACK it did not ask for. Its receive completes once the ACK is handed
// to the socket (later receives complete behind it, in order), so an
// application that sees the message and shuts down or closes at once still
// acknowledges it, as fi_pingpong's final exchange needs; receiving never
// waits for a full socket to drain.
//
// # Goroutines and the data path
//
// No endpoint owns an OS thread. A passive endpoint has one goroutine in
// Accept and one short-lived goroutine per new connection, which reads the
// connreq within ConnReqTimeout (a malformed, over-long or late request
// closes that connection only). A connected endpoint has two goroutines:
// the connection goroutine, which dials or answers, reports Connected,
// then receives until the stream ends and reports exactly one Shutdown or
// Failed; and a writer, which finishes writes the socket could not take at
// once. Connection events come only from the connection goroutine, never
// while the provider holds a lock, and never synchronously from a method
// (core calls Accept, Connect and Shutdown under its own lock).
//
// Once connected, the endpoint takes its socket out of Go's netpoller and
// drives it itself, non-blocking (io.go, netpoll.go). Both directions are
// state machines that move what the socket allows and return. A send is
// written by the goroutine that posts it, with one writev for up to 64
// messages and ACKs, so it may complete inside Post; a send posted with
// fi.MORE waits for Flush (core.Flusher), which the engine calls once per
// pass over a tx ring, so that the pass's sends share a writev. Only a
// remainder that does not fit in the socket goes to the writer. The
// responses to the read requests one progress call handles are written
// together after it. Receiving is done by
// whoever drives progress: the connection goroutine, or, while the
// endpoint's rings keep an engine group busy, that group through Poll or
// PollReady (core.FDPoller), so that a message is taken from the sender's
// ring, written, read by the peer's endpoint in the same daemon and
// completed into its CQ ring on one thread. The group tells PollReady
// whether its poll(2) found the socket readable; polled, the endpoint reads
// only then, and stops at a short read. Whoever finds the socket empty (or full) and waits
// arms a one-shot epoll registration; an engine group polling the socket
// takes both registrations out of the epoll set, so arriving data calls
// and wakes nothing. Completions are
// delivered from Post, Poll, the connection goroutine, the writer, Cancel
// and Close, in order per endpoint.
//
// fi.INJECT payloads, at most InjectSize bytes, are copied at Post into
// pooled buffers. The send path allocates nothing per message.
//
// # Back-pressure and limits
//
// Receives are consumed first in, first out. When a message arrives and no
// receive is posted, the endpoint stops reading until one is: the socket
// buffers fill and TCP holds the sender back, as libfabric does; there are
// no credits. A message longer than its buffer completes with fi.ETRUNC
// (Len the buffer's length, OLen the bytes that did not fit) and the rest
// is read and discarded, so the stream stays in step. A receive posted with
// a nil buffer gets one of the message's size, at most MaxDynamicRecv
// bytes: a larger message fails that receive with fi.EMSGSIZE and closes
// the connection, so no peer makes the daemon allocate what it likes.
//
// Post returns fi.EAGAIN beyond tx_size outstanding sends (queued, being
// written or waiting for an ACK) or rx_size posted receives; fi.ENOTCONN
// for a send when the endpoint is not connected. A domain holds at most
// EPCnt endpoints; a passive endpoint at most MaxHandshakes connections
// in handshake (a new one sheds the oldest), core.MaxPendingReqs
// unanswered requests, and MaxListenerConns open connections its listener
// accepted, endpoints made from them included, at most MaxHostConns of
// them from one remote host, or from one user of this host
// (core.HostOf); past either, new connections are closed.
//
// # What users and peers may hold
//
// A socket is charged to the user whose endpoint or passive endpoint
// holds it (core.Take, core.Connections): a listener, each connection made,
// each connection accepted, from when an endpoint takes its request
// (NewEndpoint). What peers open at a listener before that (handshakes,
// requests nobody took) counts only against the listener's bounds above,
// so that peers cannot use up a user's quota. Past the user's limit a
// connect or an accept fails with fi.ENOSPC, the sentence naming the
// user, the resource and the limit (the requester is refused). A socket accepted, or connected for a user other
// than root, that takes one of the daemon's last core.FDReserve
// descriptors is closed at once (a connect fails with fi.EMFILE), so that
// the daemon can always make descriptors of its own. An endpoint's queues
// grow with use up to tx_size and rx_size, and its writer's batch is made
// by its first write: an idle connection costs little memory.
//
// # Ending a connection
//
// Shutdown is shutdown(SHUT_RDWR): queued operations complete with
// fi.ECANCELED, and both sides get one Shutdown event (libfabric reports
// FI_SHUTDOWN on the side that called fi_shutdown too). The peer's EOF
// between messages is a Shutdown; EOF inside a message, a reset, or a
// malformed message is Failed. Close closes the socket, waits for the
// endpoint's goroutines, and completes every operation still posted with
// fi.ECANCELED before it returns; it must not be called from the
// endpoint's own callbacks. A rejected connect fails with an error wrapping
// fi.ECONNREFUSED and the rejecter's private data.
package tcp
