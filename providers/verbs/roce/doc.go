// Package roce encodes and decodes RoCEv2 packets: InfiniBand transport
// headers carried in UDP datagrams to port 4791, as Linux's soft-RoCE
// driver (drivers/infiniband/sw/rxe) and RDMA NICs send them. It is the
// packet layer of the verbs provider's pure-Go RoCE engine.
//
// # Packets
//
// A RoCEv2 datagram's UDP payload is a Base Transport Header (BTH), the
// extension headers its opcode calls for, the payload, 0 to 3 pad bytes
// that align the payload to 4 bytes, and a 4-byte Invariant CRC (ICRC).
// Opcode.Headers says which extension headers an opcode carries, in the
// IB specification's order: DETH, RETH, AtomicETH, AETH, AtomicAckETH,
// ImmDt. Packet holds every header as a value; Packet.Encode writes the
// datagram into the caller's buffer without allocating, and Packet.Decode
// checks every length, the opcode's headers, the pad count, the transport
// version and the ICRC, and returns an error for anything else. Neither
// panics on any input.
//
// The package knows the Reliable Connected opcodes and the Unreliable
// Datagram SEND opcodes; anything else (UC, RD, XRC, SEND with invalidate,
// CNP) is an unknown opcode to Decode.
//
// Reserved fields are written as zero and ignored on receipt, as the IB
// specification asks. The pad bytes are written as zero and not checked
// (the ICRC covers them).
//
// # The ICRC
//
// The ICRC is a CRC-32 over the packet and the IP and UDP headers around
// it, with the fields a router may change masked to ones (see ICRC).
// Computing it needs the datagram's addresses and ports, which a Path
// holds. For IPv4 the identification field and the flags are covered too;
// this package assumes what a sender gets from an unconnected UDP socket
// with IP_MTU_DISCOVER set to IP_PMTUDISC_DO: DF set and identification 0.
// Send that way, and check IPv4 ICRCs only of peers that do the same.
//
// # Sequence numbers and timers
//
// PSNs are 24-bit and compare modulo 2^24 (PSNAdd, PSNCompare). RNRTimer
// and RetransmitTimeout turn the 5-bit codes of RNR NAKs and of a QP's
// timeout attribute into durations.
//
// docs/roce.md has the layouts in tables, the ICRC rules and the capture
// test that checks these packets against Wireshark's dissector.
package roce
