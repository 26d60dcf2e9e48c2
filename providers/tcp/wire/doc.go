// Package wire encodes and decodes the byte format of libfabric 1.17's tcp
// provider (prov/tcp/src/tcpx_*), so that fabricfs endpoints talk to C
// programs linked with libfabric as well as to each other.
//
// Two formats share a connection. First, each side sends one connection
// management (CM) message: a 32-byte struct ofi_ctrl_hdr and up to 256
// bytes of private data (AppendCM, DecodeCMHeader, DecodeCM). Then data
// messages flow both ways, each a header of 16 to 120 bytes followed by its
// payload (Header, Header.Encode, PeekHeaderSize, Header.Decode).
//
// The decoders never panic and accept only what a 1.17 peer can send:
// version 3, a known operation, hdr_size equal to what the operation, flags
// and descriptor count require, size at least hdr_size, at most four RMA
// descriptors, no unknown flag bits. They do not decide what a connection
// supports: a read request is a valid header even where RMA is not offered.
//
// The package knows every operation of the format (messages, tagged
// messages, RMA read and write, ACKs), so the RDM (tcp;ofi_rxm), tagged and
// RMA paths reuse it unchanged; rxm's own 64-byte header will live beside
// it.
package wire
