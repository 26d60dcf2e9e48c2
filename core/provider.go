package core

import (
	"github.com/fabricfs/fabricfs/core/fi"
)

// A Provider offers a set of domains, each described by fi_info entries.
// cmd/fabricfs registers the providers it links in with New.
//
// Providers are called concurrently; every method must be safe for that.
type Provider interface {
	// Name is the provider's name as in fabric_attr.prov_name: "tcp", "verbs".
	Name() string
	// Infos returns every fi_info entry the provider offers, best-performing
	// first. Each entry names its domain in DomainAttr.Name and has SrcAddr
	// set to the domain's address with port 0.
	Infos() []*fi.Info
	// OpenDomain opens the domain called name (fi_domain).
	OpenDomain(name string) (ProviderDomain, error)
}

// Rescanner is an optional interface of a Provider whose domains follow
// the host's network interfaces. Rescan looks at the interfaces again and
// adds, after the entries Infos returned before, the entries of addresses
// that appeared since; it never removes or changes an entry, so that the
// domains opened from them stay as they are. Fabric.Rescan calls it.
type Rescanner interface {
	Rescan() error
}

// ProviderDomain is one opened domain of a provider.
type ProviderDomain interface {
	// NewEndpoint creates an active endpoint (fi_endpoint). info is the
	// endpoint's fi_info, with attributes the application may have changed
	// before enable. req is nil for an endpoint that will connect, or the
	// connection request it will accept or reject. ev receives the
	// endpoint's connection-management events.
	NewEndpoint(info *fi.Info, req ConnReq, ev EndpointEvents) (Endpoint, error)
	// NewPassiveEndpoint creates a passive endpoint (fi_passive_ep).
	NewPassiveEndpoint(info *fi.Info, ev PassiveEvents) (PassiveEndpoint, error)
	// Close releases the domain; every endpoint has been closed before.
	Close() error
}

// MemoryRegistrar is an optional interface of a ProviderDomain whose
// endpoints reach memory only through registrations made with the domain:
// libfabric's FI_MR_LOCAL (local buffers must be registered) and
// FI_MR_PROV_KEY (the provider picks the keys), as the verbs provider,
// whose device places data in registered memory only.
//
// When the domain has it, core's memory regions register their shared
// memory with it at `reg` (fi_mr_reg) and take the key it returns into the
// domain's key index (fi_mr_key): peers name the region by that key, and
// the provider resolves their operations itself, so EndpointEvents.Region
// is not asked for them. Close deregisters. Operations posted from rings
// (and the ctl verbs read, write and the atomics) carry the registration
// of the region their buffer lies in: Op.Mem and Op.MemOff (an atomic's
// result: Op.ResultMem and Op.ResultMemOff). A domain without it gets no
// registrations, and remote operations are resolved by core through
// EndpointEvents.Region.
type MemoryRegistrar interface {
	// RegisterMemory registers buf for the user owner, to be accessed as
	// access allows (fi.SEND, fi.RECV, fi.READ, fi.WRITE, fi.REMOTE_READ,
	// fi.REMOTE_WRITE; fi_mr_reg(3)). requestedKey is the key the
	// application asked for, or fi.KEY_NOTAVAIL; a provider with
	// FI_MR_PROV_KEY ignores it, as fi_mr_reg(3) says ("Parameter is
	// ignored if FI_MR_PROV_KEY flag is set in the domain mr_mode bits").
	// Addresses in the registration start at iova for buf's first byte:
	// a peer's address A names byte A-iova (0 for offsets; the address the
	// application gave the buffer for FI_MR_VIRT_ADDR, docs/tree.md's
	// mr/N/attr/iova). buf stays valid until Close.
	//
	// Peers' operations reach the memory without core, so the provider
	// keeps owners apart itself: a peer of an endpoint of one owner
	// (Owned) reaches only that owner's memory, whatever key it names, as
	// core ensures through EndpointEvents.Region for other providers;
	// and a region with an authorization key (authKey; nil: none) only
	// to peers of endpoints with that key (fi_mr(3): "Only peer
	// endpoints that are programmed to use the same authorization key may
	// access the memory region"), as Region checks for the others.
	RegisterMemory(owner uint32, buf []byte, iova uint64, access fi.Caps, requestedKey uint64, authKey []byte) (Memory, error)
}

// Atomics is an optional interface of a ProviderDomain whose endpoints of
// some types take atomic operations (FI_ATOMIC, fi_atomic(3)). core
// offers FI_ATOMIC in getinfo only for the endpoint types a domain
// answers for, and passes its answers on as fi_query_atomic's.
type Atomics interface {
	// QueryAtomic answers fi_query_atomic for endpoints of type t: for
	// an operation of kind k (OpAtomic, OpFetchAtomic or OpCompareAtomic)
	// on datatype dt with op, the most elements one operation may carry
	// and the size in bytes of one. A pair the endpoints do not take is
	// an error with libfabric's code for it (fi.EOPNOTSUPP, fi.ENOSYS,
	// fi.EINVAL), and every pair is one for a type without atomics.
	QueryAtomic(t fi.EPType, k OpKind, dt fi.AtomicType, op fi.AtomicOp) (count, size uint64, err error)
}

// Owned is implemented by the EndpointEvents core gives providers: Owner
// is the uid of the user the endpoint belongs to, for a MemoryRegistrar's
// separation of owners. A provider layered over another passes it on to
// the events it gives the provider below.
type Owned interface {
	Owner() uint32
}

// OwnerOf is the owner ev (endpoint or passive endpoint events) names
// (Owned), or 0 (root) when it names none.
func OwnerOf(ev any) uint32 {
	if o, ok := ev.(Owned); ok {
		return o.Owner()
	}
	return 0
}

// Memory is a registration made by a MemoryRegistrar.
type Memory interface {
	// Key is the remote key peers name the memory by (fi_mr_key).
	Key() uint64
	// Close deregisters the memory; operations using it afterwards fail.
	Close() error
}

// Endpoint is a provider's active endpoint. Operations are posted with Post
// and complete, in any goroutine, through Op.Complete; a provider may
// complete an operation inside Post, on the poster's goroutine, before
// Post returns.
type Endpoint interface {
	// Enable makes the endpoint ready for use (fi_enable).
	Enable() error
	// Connect starts a connection to addr with private data (fi_connect).
	// The outcome arrives later as EndpointEvents.Connected or Failed.
	Connect(addr fi.Addr, data []byte) error
	// Accept accepts the connection request the endpoint was made from
	// (fi_accept); EndpointEvents.Connected follows.
	Accept(data []byte) error
	// Reject refuses the connection request the endpoint was made from
	// (fi_reject), sending private data to the requester.
	Reject(data []byte) error
	// Shutdown closes the connection (fi_shutdown). The peer sees FI_SHUTDOWN.
	// Operations still posted may complete (flushed) before it returns.
	Shutdown() error
	// Post starts a data operation. It returns fi.EAGAIN when the queue it
	// goes to is full.
	Post(op *Op) error
	// Cancel removes a posted operation that has not started (fi_cancel):
	// it completes with fi.ECANCELED and Cancel returns true. If the
	// operation is already under way Cancel returns false and the operation
	// completes normally.
	Cancel(op *Op) bool
	// Name is the endpoint's local address (fi_getname).
	Name() (fi.Addr, error)
	// Peer is the connected peer's address (fi_getpeer).
	Peer() (fi.Addr, error)
	// Close releases the endpoint (fi_close). Posted operations that have not
	// completed complete with fi.ECANCELED before Close returns.
	Close() error
}

// Poller is an optional interface of an Endpoint whose progress can run on
// the engine's goroutine. While an engine group is busy with an endpoint's
// rings it calls Poll on every pass, so that bytes go from the socket into
// the completion ring on the thread that posted the requests, with no
// hand-off to another goroutine; when the group goes idle it calls Park, and
// the provider's own goroutines take over until the next Poll. Both may be
// called at any time, also after Close, and must not block.
type Poller interface {
	// Poll makes what progress it can without blocking and reports whether
	// it made any.
	Poll() bool
	// Park says Poll will not be called until further notice.
	Park()
}

// FDPoller is a Poller whose input arrives on one file descriptor, such as
// a socket. An engine group asks the kernel about the descriptors of all
// its hot FDPollers with one poll(2) per pass and tells each whether its
// descriptor was ready, so that a quiet socket costs no read(2) per pass:
// the group calls PollReady instead of Poll.
type FDPoller interface {
	Poller
	// PollFD is the descriptor to watch for input (POLLIN), or -1 if there
	// is none now. It may be called at any time and must not block.
	PollFD() int
	// PollReady is Poll, told whether the descriptor was readable (or had
	// an error or hang-up) at the group's poll. With false it must not
	// read the descriptor, but still makes the progress it can without
	// reading: input the provider already holds, writes that wait for room.
	// The descriptor is level-triggered: input left unread is reported
	// again at the next pass.
	PollReady(ready bool) bool
}

// Flusher is an optional interface of an Endpoint that holds the sends
// posted with fi.MORE (fi_msg(3): "Indicates that the user has additional
// requests that will immediately be posted after the current call
// returns") and writes them together at Flush, or with the next send
// posted without it. The engine posts every transmit request of a pass
// over an endpoint's tx ring with fi.MORE and calls Flush once after the
// last, so that a window of requests costs the provider one write, not
// one each; no other operation reaches a provider with fi.MORE.
type Flusher interface {
	// Flush writes (or starts writing) every send held so far. It must
	// not block; it may be called at any time, also after Close.
	Flush()
}

// PassiveEndpoint is a provider's listening endpoint.
type PassiveEndpoint interface {
	// Listen starts listening on addr (fi_listen; port 0 picks a free port).
	// Each connection request arrives as PassiveEvents.ConnReq.
	Listen(addr fi.Addr) error
	// Name is the listening address (fi_getname), with the chosen port.
	Name() (fi.Addr, error)
	// Close stops listening; pending requests that were not accepted are
	// rejected.
	Close() error
}

// ConnReq is a connection request received by a passive endpoint, pending
// until an endpoint made from it accepts or rejects it.
type ConnReq interface {
	// Info describes the requested connection: the passive endpoint's
	// attributes with DestAddr set to the requester's address.
	Info() *fi.Info
	// Data is the private data sent with the request.
	Data() []byte
}

// EndpointEvents receives an active endpoint's connection events. The
// provider calls them from any goroutine, never while holding its locks.
type EndpointEvents interface {
	// Connected reports FI_CONNECTED, with the peer's private data if any.
	Connected(data []byte)
	// Shutdown reports FI_SHUTDOWN: the peer closed the connection.
	Shutdown()
	// Failed reports an asynchronous error, such as fi.ECONNREFUSED with the
	// private data of a reject. The endpoint cannot be used afterwards.
	Failed(err error, data []byte)
	// Region finds the memory a peer's RMA operation targets: the region
	// with key allowing access (fi.REMOTE_READ or fi.REMOTE_WRITE), bytes
	// [addr, addr+n) of it (addr an offset). The provider calls release
	// when it no longer touches the bytes.
	Region(key, addr, n uint64, access fi.Caps) (buf []byte, release func(), err error)
	// Remote reports a peer's RMA operation on this endpoint's memory once
	// done: Flags fi.RMA with fi.REMOTE_WRITE or fi.REMOTE_READ, plus
	// fi.REMOTE_CQ_DATA and Data for a write that carried CQ data.
	Remote(c Completion)
}

// BufferedEvents is an optional interface of the EndpointEvents core gives
// a provider: an endpoint whose fi_info's mode has fi.BUFFERED_RECV
// reports the messages it buffers with it (fi_msg(3), "Buffered
// Receives").
type BufferedEvents interface {
	// Buffered reports a message the provider holds: c has a receive's
	// flags (fi.RECV with fi.MSG or fi.TAGGED, fi.REMOTE_CQ_DATA), with
	// fi.MORE when bytes are left to claim; Len is the message's size,
	// Tag, Data and Src as a receive's, and Key the claim key: a receive
	// with fi.CLAIM (its bytes into the receive's buffer) or fi.DISCARD
	// (dropped) and that Op.Key takes the message. It becomes the
	// completion's op_context, as fi_recv_context is in libfabric.
	// bytes are the message's first bytes the provider holds: all of
	// them, or those that have arrived. core copies them before Buffered
	// returns or, for a report that waits, before the message is claimed
	// or discarded; the provider does not change them meanwhile.
	Buffered(c Completion, bytes []byte)
}

// EndpointOptions is an optional interface of a ProviderDomain whose
// endpoints have endpoint options (fi_getopt and fi_setopt at level
// FI_OPT_ENDPOINT, fi_endpoint(3)). An endpoint of a domain without it has
// none: both calls fail with FI_ENOPROTOOPT, as for an option not listed.
type EndpointOptions interface {
	// EndpointOptions lists the options of the domain's endpoints of type
	// t, or of its passive endpoints if passive.
	EndpointOptions(t fi.EPType, passive bool) []Option
}

// Option is one endpoint option, by its name without FI_OPT_ in lower
// case ("min_multi_recv"). core keeps the values applications set and
// checks them as fi_endpoint(3) says; the provider's endpoint learns them
// through Options.
type Option struct {
	Name  string
	Value uint64 // what fi_getopt reads until fi_setopt sets it
	// Max is the largest value fi_setopt takes (a larger one fails with
	// FI_EMSGSIZE; SIZE_MAX sets Max, "the maximum supported by the
	// provider"); 0 for a read-only option such as cm_data_size.
	Max uint64
	// BeforeEnable says the option may be set only before fi_enable
	// (FI_EOPBADSTATE after).
	BeforeEnable bool
}

// Options is an optional interface of an Endpoint with endpoint options
// (EndpointOptions): core passes it every option the application sets,
// those set before enable as soon as the endpoint exists. An Endpoint
// without it ignores them.
type Options interface {
	SetOpt(name string, value uint64) error
}

// FindOption returns the option called name in opts.
func FindOption(opts []Option, name string) (Option, bool) {
	for _, o := range opts {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// AsyncErrors is implemented by the EndpointEvents core gives providers.
// A provider reports through it an error that does not end the endpoint:
// the loss of one peer's connection of an FI_EP_RDM endpoint, a peer's
// malformed message. The text goes to the endpoint's err file. Providers
// find it with a type assertion and call it without holding their locks.
type AsyncErrors interface {
	AsyncError(err error)
}

// PassiveEvents receives a passive endpoint's events.
type PassiveEvents interface {
	// ConnReq reports FI_CONNREQ.
	ConnReq(req ConnReq)
	// Failed reports an asynchronous error of the listener.
	Failed(err error)
}

// OpKind says what a data operation does.
type OpKind uint8

const (
	OpSend  OpKind = iota // fi_send, fi_inject, fi_senddata
	OpRecv                // fi_recv
	OpTSend               // fi_tsend, fi_tinject, fi_tsenddata: carries Tag
	OpTRecv               // fi_trecv: matches Tag under Ignore
	OpWrite               // fi_write, fi_inject_write, fi_writedata: Buf to the peer's region Key at Addr
	OpRead                // fi_read: the peer's region Key at Addr into Buf
	// The atomics (fi_atomic(3)) act on elements of Op.Datatype in the
	// peer's region Key at Addr with Op.AtomicOp; their element count is
	// len(Buf) over the datatype's size for OpAtomic, len(Result) over it
	// for the other two.
	OpAtomic        // fi_atomic, fi_inject_atomic: Buf's elements combined into the region
	OpFetchAtomic   // fi_fetch_atomic: as OpAtomic (Buf unused for FI_ATOMIC_READ), the region's values before it into Result
	OpCompareAtomic // fi_compare_atomic: Compare's elements compared with the region's, Buf's written where AtomicOp holds; the values before into Result
)

// CQFlags are the completion flags of an operation of kind k, as libfabric
// reports them: FI_MSG|FI_SEND, FI_TAGGED|FI_RECV, FI_RMA|FI_WRITE...
func (k OpKind) CQFlags() fi.CQFlags {
	switch k {
	case OpRecv:
		return fi.CQFlags(fi.MSG | fi.RECV)
	case OpTSend:
		return fi.CQFlags(fi.TAGGED | fi.SEND)
	case OpTRecv:
		return fi.CQFlags(fi.TAGGED | fi.RECV)
	case OpWrite:
		return fi.CQFlags(fi.RMA | fi.WRITE)
	case OpRead:
		return fi.CQFlags(fi.RMA | fi.READ)
	case OpAtomic:
		return fi.CQFlags(fi.ATOMIC | fi.WRITE)
	case OpFetchAtomic, OpCompareAtomic:
		return fi.CQFlags(fi.ATOMIC | fi.READ)
	}
	return fi.CQFlags(fi.MSG | fi.SEND)
}

// IsRecv reports whether operations of kind k receive messages: they are
// served from the rx queue and complete on the receive CQ.
func (k OpKind) IsRecv() bool { return k == OpRecv || k == OpTRecv }

// Op is one data operation posted to an endpoint. The poster fills the
// fields; the provider reads them, places data, and calls Complete exactly
// once; except for a receive with fi.MULTI_RECV in Flags (a provider with
// the FI_MULTI_RECV capability): Buf takes many messages, each completing
// with its place in Buf (Completion.Offset), and the completion that
// releases the buffer has fi.MULTI_RECV in its Flags and is the last.
type Op struct {
	Kind    OpKind
	Flags   fi.OpFlags // per-operation flags, e.g. fi.COMPLETION, fi.INJECT
	Context uint64     // the application's op_context, returned in the completion
	// Buf is the payload of a send or write, or the buffer of a receive or
	// read. A receive with a nil Buf asks the provider for a buffer that
	// fits the message; the provider sets Buf to it.
	Buf  []byte
	Data uint64 // remote CQ data of a send or write with fi.REMOTE_CQ_DATA

	Tag    uint64 // OpTSend: the tag; OpTRecv: the tag to match
	Ignore uint64 // OpTRecv: tag bits that do not take part in matching

	// Peer is the remote address of an operation on a connectionless
	// endpoint (FI_EP_RDM), resolved through its AV: the destination of a
	// send or RMA operation or, for a receive on an endpoint with
	// FI_DIRECTED_RECV, the only sender it accepts. The zero Addr means
	// none: any sender.
	Peer fi.Addr

	Addr, Key uint64 // OpWrite, OpRead, atomics: the remote buffer (fi_rma_iov, fi_rma_ioc)

	// RxCtx names a receive context of a scalable endpoint (FI_NAMED_RX_CTX,
	// fi_rx_addr): for a send, the context it goes to at the peer; for a
	// receive, the context that posted it, which takes only messages sent
	// to it. 0 for every other endpoint.
	RxCtx uint8

	// Atomics: the datatype and operation (enum fi_datatype, enum fi_op),
	// the buffer receiving the target's values from before the operation
	// (OpFetchAtomic, OpCompareAtomic) with its registration as Mem and
	// MemOff are Buf's, and the values an OpCompareAtomic compares with
	// (the same length as Result).
	Datatype     fi.AtomicType
	AtomicOp     fi.AtomicOp
	Result       []byte
	ResultMem    Memory
	ResultMemOff uint64
	Compare      []byte

	// Mem is the registration (MemoryRegistrar) of the memory Buf lies
	// in, MemOff the offset of Buf's first byte in it: the desc of
	// libfabric's data calls, which an FI_MR_LOCAL provider needs. core
	// sets them for operations from rings and the ctl verbs read, write
	// and the atomics on a domain that registers memory; Mem is nil for a buffer
	// core made itself (the data file's), which such a provider then
	// registers on its own, and for every operation of a domain that
	// does not register memory.
	Mem    Memory
	MemOff uint64

	done       func(*Op, Completion)
	iov        *opIOV           // a work request's segments, when it has more than one (local or remote)
	ep         *EP              // the endpoint that posted it, for done
	wait       func(Completion) // also gets the completion, if not nil (ep's data file)
	pooled     bool             // made by newOp for a work request: freeOp after its final completion
	mrs        opMRs            // a work request's memory regions, held until its final completion
	desc       uint64           // the work request's memory region, for its completion
	offset     uint64           // and the offset of Buf in it
	list       *opList          // ep's inflight list while listed, under ep.mu
	prev, next *Op              // its neighbours there
	credit     *CQ              // the CQ that holds room for its completion (FI_RM_ENABLED), until it completes
	queue      *workQueue       // the ring it came from, woken when credit's CQ has room; nil for the shell

	// withdrawn (under ep.mu) marks a data-file receive that an
	// interrupted read cancels: its FI_ECANCELED is not reported.
	withdrawn bool
}

// Completion is the outcome of an Op, as fi_cq_tagged_entry and
// fi_cq_err_entry describe it.
type Completion struct {
	Flags     fi.CQFlags // e.g. fi.MSG|fi.RECV, plus fi.REMOTE_CQ_DATA
	Len       uint64     // bytes placed (receive) or sent
	Data      uint64     // remote CQ data
	Tag       uint64     // the tag of a received tagged message
	Src       fi.Addr    // the sender of a received message, if the provider knows it (FI_SOURCE)
	Err       fi.Errno   // 0, or the error, e.g. fi.ETRUNC, fi.ECANCELED
	ProvErrno int        // the provider's own error number, 0 if none
	OLen      uint64     // with fi.ETRUNC: bytes that did not fit
	Offset    uint64     // where in Op.Buf the data starts: 0 but for FI_MULTI_RECV
	// Key is, in an EndpointEvents.Remote report, the key of the memory
	// region (or, for a provider that registers memory, MemoryRegistrar,
	// of the registration) the peer's operation reached: the first, if
	// it reached several. Counters bound to that region count it.
	Key uint64
}

// OnComplete sets the function Complete calls. core sets it on the
// operations it posts; a provider layered over another (rxm over tcp)
// sets it on the operations it posts to the provider below.
func (op *Op) OnComplete(f func(*Op, Completion)) { op.done = f }

// Complete reports the operation's outcome. It must be called exactly once
// (for FI_MULTI_RECV: see Op), and the provider must not touch op after
// the final call: core reuses the Ops of work requests. The function it
// calls must not block, and may call back into the endpoint only to Post:
// providers call it with some of their locks held, to keep completions in
// order, and take care that Post does not need them (a receive reposted
// from its own completion is the common case). Cancel and Close from a
// completion are not allowed.
func (op *Op) Complete(c Completion) {
	if op.done != nil {
		op.done(op, c)
	}
}
