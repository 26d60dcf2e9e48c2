// Package wire encodes and decodes the byte format of libfabric 1.17's rxm
// utility provider over its tcp provider ("tcp;ofi_rxm", prov/rxm/src), the
// FI_EP_RDM wire of docs/rxm.md, so that fabricfs RDM endpoints talk to C
// programs linked with libfabric as well as to each other.
//
// rxm runs over one tcp MSG connection per pair of peers; the tcp framing
// (CM messages, the 16-byte data header, RMA read and write) belongs to
// providers/tcp/wire. This package adds what rxm puts inside it:
//
//   - the private data of the tcp CM messages: Connect (24 bytes),
//     Accept (16) and Reject (2), and the ConnID they carry;
//   - the 64-byte rxm header (Header) that starts every rxm message
//     carried in a tcp OpMsg without the tagged flag;
//   - the bodies that follow some headers: the rendezvous header
//     (RndvHeader, 104 bytes), the atomic request (AtomicRequest) and the
//     atomic response (AtomicResponse).
//
// Tagged messages up to EagerLimit bytes are not rxm messages at all: they
// are bare tcp messages with the tcp tagged flag (providers/tcp/wire).
//
// libfabric leaves stale bytes in header fields that a message type does
// not use (msg_id of an eager message, the whole op header of a read-done,
// iov entries past the count of a rendezvous header). The decoders keep
// those bytes as received, so that what they accept encodes back to the
// same bytes, and check only the fields that mean something for the
// message type, against what a 1.17 peer can send. They never panic.
//
// Multi-byte fields are little-endian (the sender's order; a peer of the
// other order is refused by the Connect check), except the status and
// length of an atomic response, which are big-endian.
package wire
