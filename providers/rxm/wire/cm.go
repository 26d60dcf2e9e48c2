package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Versions and limits rxm announces and checks (prov/rxm/src/rxm.h).
const (
	CMVersion    = 1 // RXM_CM_DATA_VERSION: first byte of connect and reject data
	CtrlVersion  = 4 // RXM_CTRL_VERSION: connect data, and byte 0 of every Header
	CMOpVersion  = 3 // RXM_OP_VERSION: announced in connect data only
	OpVersion    = 2 // OFI_OP_VERSION: byte 32 of every Header
	EndianLittle = 2 // OFI_ENDIAN_LITTLE (include/ofi_osd.h), the only order fabricfs speaks

	// EagerLimit is rxm's buffer_size and eager_limit: the largest message
	// sent eagerly. Both sides must announce the same value.
	EagerLimit = 16384
	// RxSize is what a 1.17 peer announces as rx_size (RXM_MSG_SRX_SIZE,
	// the tcp shared receive context's size); nobody reads it.
	RxSize = 4096

	ConnectSize = 24 // sizeof(union rxm_cm_data): fi_connect's private data
	AcceptSize  = 16 // sizeof(struct _accept): fi_accept's private data
	RejectSize  = 2  // sizeof(struct _reject): fi_reject's private data

	// MaxIndex is the largest peer index a ConnID can carry: rxm keeps it
	// in a C int.
	MaxIndex = 1<<31 - 1
)

// FlowCtrl is the flow-control byte of connect and accept data
// (RXM_CM_FLOW_CTRL_*). Over tcp it is always FlowCtrlPeerOff: the tcp
// provider has no credit-based flow control.
type FlowCtrl uint8

const (
	FlowCtrlLocal   FlowCtrl = 0 // peers before 1.13: decide locally
	FlowCtrlPeerOn  FlowCtrl = 1
	FlowCtrlPeerOff FlowCtrl = 2
)

// RejectReason is the second byte of reject data (RXM_REJECT_*).
type RejectReason uint8

const (
	RejectUnspec      RejectReason = 0
	RejectConnRefused RejectReason = 1 // bad connect data, or no resources
	RejectAlready     RejectReason = 2 // simultaneous connect: the other connection wins
)

func (r RejectReason) String() string {
	switch r {
	case RejectUnspec:
		return "unspecified"
	case RejectConnRefused:
		return "connection refused"
	case RejectAlready:
		return "already connected"
	}
	return fmt.Sprintf("reject reason %d", uint8(r))
}

// ConnID is rxm's connection id: the sender's process id in the high 32
// bits and the index under which the sender keeps the peer in the low 32
// bits (rxm_conn_id). A peer puts the low half back into Header.ConnID of
// every message it sends, and rxm finds the connection by it.
type ConnID uint64

// MakeConnID returns the ConnID for process pid and peer index index.
func MakeConnID(pid uint32, index uint32) ConnID {
	return ConnID(uint64(pid)<<32 | uint64(index))
}

// PID is the announcing process's id (rxm_peer_pid).
func (c ConnID) PID() uint32 { return uint32(c >> 32) }

// Index is the announcing side's index of the connection (rxm_peer_index).
func (c ConnID) Index() uint32 { return uint32(c) }

// Connect is the private data of the tcp connect request an rxm endpoint
// sends (union rxm_cm_data, struct _connect):
//
//	off size field
//	0   1    version        CMVersion
//	1   1    endianness     EndianLittle
//	2   1    ctrl_version   CtrlVersion
//	3   1    op_version     CMOpVersion
//	4   2    port           the connecting endpoint's LISTENING port
//	6   1    flow_ctrl      FlowCtrl
//	7   1    padding        0
//	8   4    eager_limit    EagerLimit
//	12  4    rx_size        RxSize
//	16  8    client_conn_id ConnID
type Connect struct {
	Port       uint16 // host value (not network order)
	FlowCtrl   FlowCtrl
	EagerLimit uint32
	RxSize     uint32
	ConnID     ConnID
}

// Accept is the private data of the tcp connect response (struct _accept):
//
//	off size field
//	0   8    server_conn_id ConnID
//	8   4    rx_size        RxSize
//	12  1    flow_ctrl      FlowCtrl
//	13  3    padding        0
type Accept struct {
	ConnID   ConnID
	RxSize   uint32
	FlowCtrl FlowCtrl
}

// Reject is the private data of the tcp reject (struct _reject):
//
//	off size field
//	0   1    version CMVersion
//	1   1    reason  RejectReason
type Reject struct {
	Reason RejectReason
}

// ErrEagerLimit is returned by DecodeConnect for a peer whose eager limit is
// not EagerLimit: libfabric refuses such a peer (RejectConnRefused).
var ErrEagerLimit = errors.New("rxm: eager limit differs from 16384")

// NewConnect returns the connect data a 1.17 peer would send from an
// endpoint listening on port, announcing id.
func NewConnect(port uint16, id ConnID) Connect {
	return Connect{Port: port, FlowCtrl: FlowCtrlPeerOff, EagerLimit: EagerLimit, RxSize: RxSize, ConnID: id}
}

// NewAccept returns the accept data a 1.17 peer would send, announcing id.
func NewAccept(id ConnID) Accept {
	return Accept{ConnID: id, RxSize: RxSize, FlowCtrl: FlowCtrlPeerOff}
}

// Validate checks what libfabric checks, and what a 1.17 peer always
// sends: a non-zero port, a known flow-control byte, the eager limit, and
// an index that fits rxm's int.
func (c *Connect) Validate() error {
	if c.Port == 0 {
		return errorf("connect: port 0")
	}
	if c.FlowCtrl > FlowCtrlPeerOff {
		return errorf("connect: flow_ctrl %d", c.FlowCtrl)
	}
	if c.EagerLimit != EagerLimit {
		return fmt.Errorf("%w: %d", ErrEagerLimit, c.EagerLimit)
	}
	if c.ConnID.Index() > MaxIndex {
		return errorf("connect: peer index %#x does not fit an int", c.ConnID.Index())
	}
	return nil
}

// Encode validates c and returns its ConnectSize bytes.
func (c *Connect) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, ConnectSize)
	b[0] = CMVersion
	b[1] = EndianLittle
	b[2] = CtrlVersion
	b[3] = CMOpVersion
	binary.LittleEndian.PutUint16(b[4:], c.Port)
	b[6] = byte(c.FlowCtrl)
	binary.LittleEndian.PutUint32(b[8:], c.EagerLimit)
	binary.LittleEndian.PutUint32(b[12:], c.RxSize)
	binary.LittleEndian.PutUint64(b[16:], uint64(c.ConnID))
	return b, nil
}

// DecodeConnect decodes and validates connect data. It needs exactly
// ConnectSize bytes: libfabric reads that many whatever the peer sent, so
// shorter data would be completed with stale bytes. A version, byte order
// or eager limit other than 1.17's is an error (ErrEagerLimit for the
// latter); libfabric answers all of them with RejectConnRefused.
func DecodeConnect(b []byte) (Connect, error) {
	if len(b) != ConnectSize {
		return Connect{}, errorf("connect: %d bytes of private data, want %d", len(b), ConnectSize)
	}
	if b[0] != CMVersion || b[1] != EndianLittle || b[2] != CtrlVersion || b[3] != CMOpVersion {
		return Connect{}, errorf("connect: version %d, endianness %d, ctrl_version %d, op_version %d; want %d %d %d %d",
			b[0], b[1], b[2], b[3], CMVersion, EndianLittle, CtrlVersion, CMOpVersion)
	}
	c := Connect{
		Port:       binary.LittleEndian.Uint16(b[4:]),
		FlowCtrl:   FlowCtrl(b[6]),
		EagerLimit: binary.LittleEndian.Uint32(b[8:]),
		RxSize:     binary.LittleEndian.Uint32(b[12:]),
		ConnID:     ConnID(binary.LittleEndian.Uint64(b[16:])),
	}
	if err := c.Validate(); err != nil {
		return Connect{}, err
	}
	return c, nil
}

// Validate checks the flow-control byte and the index.
func (a *Accept) Validate() error {
	if a.FlowCtrl > FlowCtrlPeerOff {
		return errorf("accept: flow_ctrl %d", a.FlowCtrl)
	}
	if a.ConnID.Index() > MaxIndex {
		return errorf("accept: peer index %#x does not fit an int", a.ConnID.Index())
	}
	return nil
}

// Encode validates a and returns its AcceptSize bytes.
func (a *Accept) Encode() ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, AcceptSize)
	binary.LittleEndian.PutUint64(b, uint64(a.ConnID))
	binary.LittleEndian.PutUint32(b[8:], a.RxSize)
	b[12] = byte(a.FlowCtrl)
	return b, nil
}

// DecodeAccept decodes and validates accept data (exactly AcceptSize
// bytes; the padding is not checked).
func DecodeAccept(b []byte) (Accept, error) {
	if len(b) != AcceptSize {
		return Accept{}, errorf("accept: %d bytes of private data, want %d", len(b), AcceptSize)
	}
	a := Accept{
		ConnID:   ConnID(binary.LittleEndian.Uint64(b)),
		RxSize:   binary.LittleEndian.Uint32(b[8:]),
		FlowCtrl: FlowCtrl(b[12]),
	}
	if err := a.Validate(); err != nil {
		return Accept{}, err
	}
	return a, nil
}

// Encode returns r's RejectSize bytes.
func (r *Reject) Encode() ([]byte, error) {
	if r.Reason > RejectAlready {
		return nil, errorf("reject: reason %d", r.Reason)
	}
	return []byte{CMVersion, byte(r.Reason)}, nil
}

// DecodeReject decodes reject data. libfabric reads anything it cannot
// decode (fewer than 2 bytes, another version) as RejectConnRefused; this
// decoder returns an error for those, and for unknown reasons, and the
// caller should do the same.
func DecodeReject(b []byte) (Reject, error) {
	if len(b) != RejectSize {
		return Reject{}, errorf("reject: %d bytes of private data, want %d", len(b), RejectSize)
	}
	if b[0] != CMVersion {
		return Reject{}, errorf("reject: version %d, want %d", b[0], CMVersion)
	}
	if RejectReason(b[1]) > RejectAlready {
		return Reject{}, errorf("reject: reason %d", b[1])
	}
	return Reject{Reason: RejectReason(b[1])}, nil
}

func errorf(format string, a ...any) error {
	return fmt.Errorf("rxm: "+format, a...)
}
