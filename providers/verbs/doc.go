// Package verbs is fabricfs's verbs provider: libfabric's verbs
// semantics over the software RDMA device of package ibv, which speaks
// RoCEv2 over UDP. docs/verbs.md describes it; this is the map.
//
// New opens one device per configured IP address. Each device has two
// domains, as libfabric's verbs provider has: "<device>" for FI_EP_MSG
// endpoints on RC queue pairs (and, through rxm.Wrap, FI_EP_RDM), and
// "<device>-dgram" for FI_EP_DGRAM endpoints on UD queue pairs.
//
//   - info.go: the fi_info entries, built from the device's attributes.
//   - cm.go, cmconn.go: the connection manager, one agent per device:
//     IB CM-style messages (package cm) in datagrams between the
//     devices' GSI QPs, which connect RC QPs (REQ, REP, RTU, REJ, DREQ,
//     DREP) and resolve UD service ports (SIDR_REQ, SIDR_REP).
//   - pep.go, ep.go: passive and FI_EP_MSG endpoints; an idle connection's
//     keepalive, which finds a dead peer. An RC endpoint's QP is charged
//     to its owner as one of core.Connections (core.Take on its events)
//     from Enable until it is destroyed: endpoints that connect, that
//     accept a request, and rxm's connections over verbs alike; past the
//     owner's limit Enable fails with FI_ENOSPC.
//   - probe.go: refusing for a while the connections of a peer that
//     presented a bad memory key.
//   - dgram.go: FI_EP_DGRAM endpoints.
//   - qp.go: posting work requests and turning work completions into
//     operation completions, for both.
//   - mem.go: memory registration (core.MemoryRegistrar: FI_MR_LOCAL,
//     FI_MR_PROV_KEY) and the memory of each operation.
package verbs
