package wire

import (
	"encoding/binary"
	"fmt"
)

// Connection management: the one message each side sends after the TCP
// connection is up (struct ofi_ctrl_hdr, include/ofi_proto.h, followed by the
// private data; prov/tcp/src/tcpx.h struct tcpx_cm_msg).
//
//	off size field      value
//	0   1    version    3
//	1   1    type       0 connreq, 1 connresp, 6 reject
//	2   2    seg_size   private-data length, BIG-endian
//	4   4    seg_no     0
//	8   8    conn_id    0
//	16  8    msg_id     0
//	24  8    conn_data  1 in the sender's byte order (connreq, connresp); 0 in a reject
//	32  n    private data, n <= 256
//
// An authorization key (fi_endpoint(3) auth_key) is fabricfs's own
// addition, sent only by an endpoint that has one, so that a message
// without a key is libfabric's exactly: a connreq or connresp with a key
// has AuthMagic in msg_id and the key's length k (1..MaxAuthKey) in
// seg_no, big-endian as seg_size, and its k bytes follow the private
// data (seg_size counts the private data alone). libfabric does not read
// msg_id or seg_no; a libfabric peer sent a keyed message would take the
// key's bytes for the next message, but a keyed endpoint talks only to a
// peer with the same key, which libfabric's tcp never is, so it refuses
// the connection whatever the peer makes of them.
const (
	CMVersion    = 3   // TCPX_CTRL_HDR_VERSION
	CMHeaderSize = 32  // sizeof(struct ofi_ctrl_hdr)
	MaxCMData    = 256 // TCPX_MAX_CM_DATA_SIZE
	MaxAuthKey   = 64  // fi.MaxAuthKeySize: the longest authorization key
)

// AuthMagic in msg_id says that an authorization key follows the private
// data: "fabricfs" in ASCII.
var AuthMagic = [8]byte{'f', 'a', 'b', 'r', 'i', 'c', 'f', 's'}

// CMType is ofi_ctrl_hdr.type.
type CMType uint8

// The CM message types the tcp provider uses (enum ofi_ctrl_*).
const (
	CMConnReq  CMType = 0 // ofi_ctrl_connreq: active side, with fi_connect's data
	CMConnResp CMType = 1 // ofi_ctrl_connresp: fi_accept's answer
	CMReject   CMType = 6 // ofi_ctrl_nack: fi_reject's answer
)

func (t CMType) String() string {
	switch t {
	case CMConnReq:
		return "connreq"
	case CMConnResp:
		return "connresp"
	case CMReject:
		return "reject"
	}
	return fmt.Sprintf("cmtype(%d)", uint8(t))
}

// CMHeader is a decoded CM header: the message type and how many bytes of
// private data and of authorization key follow it.
type CMHeader struct {
	Type    CMType
	DataLen int // 0..MaxCMData
	KeyLen  int // 0..MaxAuthKey; 0 in a reject
}

// AppendCM appends a CM message of type t carrying private data and, in a
// connreq or connresp, an authorization key (nil: none) to dst: header,
// data and key together, to be sent in one write. It refuses more than
// MaxCMData bytes of data, which would desynchronise a C peer, and a key
// longer than MaxAuthKey or in a reject.
func AppendCM(dst []byte, t CMType, data, key []byte) ([]byte, error) {
	if !t.valid() {
		return dst, errorf("cm: bad type %d", uint8(t))
	}
	if len(data) > MaxCMData {
		return dst, errorf("cm: %d bytes of private data, at most %d", len(data), MaxCMData)
	}
	if len(key) > MaxAuthKey || (len(key) > 0 && t == CMReject) {
		return dst, errorf("cm: a %v with a %d-byte authorization key: at most %d, none in a reject", t, len(key), MaxAuthKey)
	}
	var h [CMHeaderSize]byte
	h[0] = CMVersion
	h[1] = byte(t)
	binary.BigEndian.PutUint16(h[2:], uint16(len(data)))
	if len(key) > 0 {
		binary.BigEndian.PutUint32(h[4:], uint32(len(key)))
		copy(h[16:], AuthMagic[:])
	}
	if t != CMReject {
		binary.LittleEndian.PutUint64(h[24:], 1) // byte-order probe
	}
	dst = append(dst, h[:]...)
	dst = append(dst, data...)
	return append(dst, key...), nil
}

// DecodeCMHeader decodes and validates the CM header at the start of b. The
// reserved fields (seg_no, conn_id, msg_id) are not checked, as libfabric
// does not check them, unless msg_id is AuthMagic: then seg_no is the
// length of the authorization key, 1..MaxAuthKey, in a connreq or
// connresp. A connreq or connresp whose conn_data is not 1 in
// little-endian order comes from a peer of the other byte order, which
// fabricfs does not support.
func DecodeCMHeader(b []byte) (CMHeader, error) {
	if len(b) < CMHeaderSize {
		return CMHeader{}, ErrShort
	}
	if b[0] != CMVersion {
		return CMHeader{}, errorf("cm: version %d, want %d", b[0], CMVersion)
	}
	t := CMType(b[1])
	if !t.valid() {
		return CMHeader{}, errorf("cm: unknown message type %d", b[1])
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if n > MaxCMData {
		return CMHeader{}, errorf("cm: %d bytes of private data, at most %d", n, MaxCMData)
	}
	if t != CMReject {
		if probe := binary.LittleEndian.Uint64(b[24:]); probe != 1 {
			return CMHeader{}, errorf("cm: conn_data %#x, want 1: peer of another byte order", probe)
		}
	}
	k := 0
	if [8]byte(b[16:24]) == AuthMagic {
		kl := binary.BigEndian.Uint32(b[4:])
		if t == CMReject || kl == 0 || kl > MaxAuthKey {
			return CMHeader{}, errorf("cm: a %v with a %d-byte authorization key: 1 to %d, none in a reject", t, kl, MaxAuthKey)
		}
		k = int(kl)
	}
	return CMHeader{Type: t, DataLen: n, KeyLen: k}, nil
}

// DecodeCM decodes a whole CM message at the start of b: its header,
// private data and authorization key (nil: none). data and key alias b. n
// is the message's length in bytes.
func DecodeCM(b []byte) (h CMHeader, data, key []byte, n int, err error) {
	h, err = DecodeCMHeader(b)
	if err != nil {
		return CMHeader{}, nil, nil, 0, err
	}
	d := CMHeaderSize + h.DataLen
	n = d + h.KeyLen
	if len(b) < n {
		return CMHeader{}, nil, nil, 0, ErrShort
	}
	if h.KeyLen > 0 {
		key = b[d:n:n]
	}
	return h, b[CMHeaderSize:d:d], key, n, nil
}

func (t CMType) valid() bool { return t == CMConnReq || t == CMConnResp || t == CMReject }
