// Package cm is the wire format of the verbs provider's connection
// manager: the messages two devices exchange in UD datagrams between their
// GSI QPs (QP1) to set up, refuse and tear down RC connections, and to
// resolve a UD endpoint's service port to its QP number. The messages are
// modelled on InfiniBand CM's (IBA volume 1, chapter 12): a 256-byte MAD
// with the MAD common header (management class 0x07, class version 2,
// method Send) and one of REQ, REP, RTU, REJ, DREQ, DREP, SIDR_REQ,
// SIDR_REP, identified by IB's attribute IDs. Their bodies carry what
// fabricfs's connections use, in a layout of fabricfs's own (docs/verbs.md
// gives it byte by byte); they are not IB CM's bit fields.
//
// All integers are big-endian. Encode zeroes what a message does not use;
// Decode ignores it, as IB receivers ignore reserved fields, and checks
// every field it reads: a malformed message is an error, never a panic.
package cm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// Sizes and constants of the MAD.
const (
	MADSize        = 256 // every CM message is one MAD
	HeaderSize     = 24  // the MAD common header
	BaseVersion    = 1
	ClassCM        = 0x07 // IB_MGMT_CLASS_CM
	ClassVersion   = 2
	MethodSend     = 0x03 // IB_MGMT_METHOD_SEND
	MaxPrivateData = 55   // bytes of private data: libfabric 1.17 verbs's cm_data_size (VERBS_CM_DATA_SIZE)
	MaxAuthKey     = 64   // bytes of authorization key: fi.MaxAuthKeySize
	authKeyOffset  = 96   // where REQ's and REP's authorization key is, past their private data
)

// Service IDs: rdma_cm's, (port space << 16) | port, for a service port of
// a device: a listener's (RC, port space RDMA_PS_TCP) or a UD endpoint's
// (RDMA_PS_UDP).
const (
	PortSpaceTCP = 0x0106
	PortSpaceUDP = 0x0111
)

// ServiceID is the service ID of port in port space ps.
func ServiceID(ps uint16, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

// ServicePort splits a service ID of port space ps; ok is false for one
// of another space.
func ServicePort(id uint64, ps uint16) (port uint16, ok bool) {
	if id>>16 != uint64(ps) {
		return 0, false
	}
	return uint16(id), true
}

// Type is a CM message's MAD attribute ID.
type Type uint16

const (
	REQ     Type = 0x0010 // CM_REQ_ATTR_ID: connect request
	REJ     Type = 0x0012 // CM_REJ_ATTR_ID: reject
	REP     Type = 0x0013 // CM_REP_ATTR_ID: reply
	RTU     Type = 0x0014 // CM_RTU_ATTR_ID: ready to use
	DREQ    Type = 0x0015 // CM_DREQ_ATTR_ID: disconnect request
	DREP    Type = 0x0016 // CM_DREP_ATTR_ID: disconnect reply
	SIDRREQ Type = 0x0017 // CM_SIDR_REQ_ATTR_ID: service ID resolution request
	SIDRREP Type = 0x0018 // CM_SIDR_REP_ATTR_ID: its reply
)

var typeNames = map[Type]string{REQ: "REQ", REJ: "REJ", REP: "REP", RTU: "RTU", DREQ: "DREQ", DREP: "DREP",
	SIDRREQ: "SIDR_REQ", SIDRREP: "SIDR_REP"}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("attribute %#04x", uint16(t))
}

// Reject reasons (IB CM REJ reason codes).
const (
	RejNoQP           = 1  // IB_CM_REJ_NO_QP: no QP to take the connection
	RejNoResources    = 3  // IB_CM_REJ_NO_RESOURCES: refused for now
	RejTimeout        = 4  // IB_CM_REJ_TIMEOUT
	RejInvalidCommID  = 6  // IB_CM_REJ_INVALID_COMM_ID: no such connection
	RejInvalidService = 8  // IB_CM_REJ_INVALID_SERVICE_ID: nobody listens on the service
	RejConsumer       = 28 // IB_CM_REJ_CONSUMER_DEFINED: the application refused (fi_reject)
)

// SIDR_REP statuses.
const (
	SIDRValid        = 0 // IB_SIDR_SUCCESS: QPN and Q_Key are valid
	SIDRNotSupported = 1 // IB_SIDR_UNSUPPORTED: no UD endpoint has the service
)

// Msg is one CM message. Type says which fields it carries:
//
//	REQ       LocalCommID ServiceID QPN PSN ResponderResources InitiatorDepth PathMTU RetryCount RNRRetryCount SrcPort PrivateData AuthKey
//	REP       LocalCommID RemoteCommID QPN PSN ResponderResources InitiatorDepth PathMTU RNRRetryCount PrivateData AuthKey
//	RTU       LocalCommID RemoteCommID
//	REJ       LocalCommID RemoteCommID Reason PrivateData
//	DREQ      LocalCommID RemoteCommID QPN (the receiver's QP)
//	DREP      LocalCommID RemoteCommID
//	SIDR_REQ  RequestID ServiceID
//	SIDR_REP  RequestID Status QPN QKey
//
// LocalCommID is the sender's identifier of the connection, RemoteCommID
// the receiver's, as in IB CM.
type Msg struct {
	Type          Type
	TransactionID uint64

	LocalCommID, RemoteCommID uint32
	ServiceID                 uint64
	QPN                       uint32 // 24 bits
	PSN                       uint32 // 24 bits: the sender's starting PSN
	ResponderResources        uint8  // RDMA reads the sender serves at once
	InitiatorDepth            uint8  // RDMA reads the sender issues at once
	PathMTU                   uint8  // enum ibv_mtu, 1..5: the sender's (REQ), the connection's (REP)
	RetryCount                uint8  // 0..7
	RNRRetryCount             uint8  // 0..7, 7 = forever
	SrcPort                   uint16 // the requester's service port: its side of the connection's address
	Reason                    uint16 // REJ
	RequestID                 uint32 // SIDR
	Status                    uint8  // SIDR_REP
	QKey                      uint32 // SIDR_REP
	PrivateData               []byte // at most MaxPrivateData bytes
	// AuthKey is the sender's authorization key (fi_endpoint(3)
	// auth_key; nil: none), at most MaxAuthKey bytes: REQ's is the
	// requester's, REP's the listener's.
	AuthKey []byte
}

// Errors of Decode.
var (
	ErrSize   = errors.New("cm: a CM message is one 256-byte MAD")
	ErrHeader = errors.New("cm: not a CM MAD (base version, class, class version or method)")
)

// Encode writes m as a MAD into b, which must hold MADSize bytes.
func (m *Msg) Encode(b []byte) error {
	if len(b) < MADSize {
		return ErrSize
	}
	if err := m.check(); err != nil {
		return err
	}
	b = b[:MADSize]
	clear(b)
	b[0], b[1], b[2], b[3] = BaseVersion, ClassCM, ClassVersion, MethodSend
	binary.BigEndian.PutUint64(b[8:], m.TransactionID)
	binary.BigEndian.PutUint16(b[16:], uint16(m.Type))
	p := b[HeaderSize:]
	be := binary.BigEndian
	switch m.Type {
	case REQ:
		be.PutUint32(p[0:], m.LocalCommID)
		be.PutUint64(p[8:], m.ServiceID)
		be.PutUint32(p[16:], m.QPN)
		be.PutUint32(p[20:], m.PSN)
		p[24], p[25], p[26], p[27], p[28] = m.ResponderResources, m.InitiatorDepth, m.PathMTU, m.RetryCount, m.RNRRetryCount
		be.PutUint16(p[30:], m.SrcPort)
		putData(p[32:], m.PrivateData)
		putData(p[authKeyOffset:], m.AuthKey)
	case REP:
		be.PutUint32(p[0:], m.LocalCommID)
		be.PutUint32(p[4:], m.RemoteCommID)
		be.PutUint32(p[8:], m.QPN)
		be.PutUint32(p[12:], m.PSN)
		p[16], p[17], p[18], p[19] = m.ResponderResources, m.InitiatorDepth, m.PathMTU, m.RNRRetryCount
		putData(p[20:], m.PrivateData)
		putData(p[authKeyOffset:], m.AuthKey)
	case RTU, DREP:
		be.PutUint32(p[0:], m.LocalCommID)
		be.PutUint32(p[4:], m.RemoteCommID)
	case REJ:
		be.PutUint32(p[0:], m.LocalCommID)
		be.PutUint32(p[4:], m.RemoteCommID)
		be.PutUint16(p[8:], m.Reason)
		putData(p[12:], m.PrivateData)
	case DREQ:
		be.PutUint32(p[0:], m.LocalCommID)
		be.PutUint32(p[4:], m.RemoteCommID)
		be.PutUint32(p[8:], m.QPN)
	case SIDRREQ:
		be.PutUint32(p[0:], m.RequestID)
		be.PutUint64(p[8:], m.ServiceID)
	case SIDRREP:
		be.PutUint32(p[0:], m.RequestID)
		p[4] = m.Status
		be.PutUint32(p[8:], m.QPN)
		be.PutUint32(p[12:], m.QKey)
	}
	return nil
}

// putData writes private data as its length and its bytes.
func putData(p []byte, d []byte) {
	p[0] = uint8(len(d))
	copy(p[1:], d)
}

// Decode reads a MAD. PrivateData is a copy.
func Decode(b []byte) (Msg, error) {
	if len(b) != MADSize {
		return Msg{}, ErrSize
	}
	if b[0] != BaseVersion || b[1] != ClassCM || b[2] != ClassVersion || b[3] != MethodSend {
		return Msg{}, ErrHeader
	}
	be := binary.BigEndian
	m := Msg{Type: Type(be.Uint16(b[16:])), TransactionID: be.Uint64(b[8:])}
	p := b[HeaderSize:]
	var err error
	switch m.Type {
	case REQ:
		m.LocalCommID, m.ServiceID = be.Uint32(p[0:]), be.Uint64(p[8:])
		m.QPN, m.PSN = be.Uint32(p[16:]), be.Uint32(p[20:])
		m.ResponderResources, m.InitiatorDepth, m.PathMTU, m.RetryCount, m.RNRRetryCount = p[24], p[25], p[26], p[27], p[28]
		m.SrcPort = be.Uint16(p[30:])
		m.PrivateData, err = getData(p[32:], MaxPrivateData)
		if err == nil {
			m.AuthKey, err = getData(p[authKeyOffset:], MaxAuthKey)
		}
	case REP:
		m.LocalCommID, m.RemoteCommID = be.Uint32(p[0:]), be.Uint32(p[4:])
		m.QPN, m.PSN = be.Uint32(p[8:]), be.Uint32(p[12:])
		m.ResponderResources, m.InitiatorDepth, m.PathMTU, m.RNRRetryCount = p[16], p[17], p[18], p[19]
		m.PrivateData, err = getData(p[20:], MaxPrivateData)
		if err == nil {
			m.AuthKey, err = getData(p[authKeyOffset:], MaxAuthKey)
		}
	case RTU, DREP:
		m.LocalCommID, m.RemoteCommID = be.Uint32(p[0:]), be.Uint32(p[4:])
	case REJ:
		m.LocalCommID, m.RemoteCommID, m.Reason = be.Uint32(p[0:]), be.Uint32(p[4:]), be.Uint16(p[8:])
		m.PrivateData, err = getData(p[12:], MaxPrivateData)
	case DREQ:
		m.LocalCommID, m.RemoteCommID, m.QPN = be.Uint32(p[0:]), be.Uint32(p[4:]), be.Uint32(p[8:])
	case SIDRREQ:
		m.RequestID, m.ServiceID = be.Uint32(p[0:]), be.Uint64(p[8:])
	case SIDRREP:
		m.RequestID, m.Status, m.QPN, m.QKey = be.Uint32(p[0:]), p[4], be.Uint32(p[8:]), be.Uint32(p[12:])
	default:
		return Msg{}, fmt.Errorf("cm: unknown message %v", m.Type)
	}
	if err == nil {
		err = m.check()
	}
	if err != nil {
		return Msg{}, err
	}
	return m, nil
}

// getData reads private data (or a key) written by putData, of at most
// limit bytes.
func getData(p []byte, limit int) ([]byte, error) {
	n := int(p[0])
	if n > limit {
		return nil, fmt.Errorf("cm: %d bytes of private data or key, more than %d", n, limit)
	}
	if n == 0 {
		return nil, nil
	}
	return append([]byte(nil), p[1:1+n]...), nil
}

// check validates the fields m's type carries.
func (m *Msg) check() error {
	switch m.Type {
	case REQ, REP, REJ, RTU, DREQ, DREP, SIDRREQ, SIDRREP:
	default:
		return fmt.Errorf("cm: unknown message %v", m.Type)
	}
	if len(m.PrivateData) > MaxPrivateData {
		return fmt.Errorf("cm: %v: %d bytes of private data, more than %d", m.Type, len(m.PrivateData), MaxPrivateData)
	}
	if len(m.AuthKey) > MaxAuthKey || (len(m.AuthKey) > 0 && m.Type != REQ && m.Type != REP) {
		return fmt.Errorf("cm: %v: a %d-byte authorization key: at most %d, in a REQ or REP", m.Type, len(m.AuthKey), MaxAuthKey)
	}
	if m.QPN > roce.QPNMask || m.PSN > roce.PSNMask {
		return fmt.Errorf("cm: %v: QPN %#x or PSN %#x wider than 24 bits", m.Type, m.QPN, m.PSN)
	}
	switch m.Type {
	case REQ:
		if m.PathMTU < 1 || m.PathMTU > 5 || m.RetryCount > 7 || m.RNRRetryCount > 7 {
			return fmt.Errorf("cm: REQ: path MTU %d (want 1..5), retry count %d, RNR retry count %d (want 0..7)",
				m.PathMTU, m.RetryCount, m.RNRRetryCount)
		}
		if m.LocalCommID == 0 {
			return errors.New("cm: REQ with communication ID 0")
		}
	case REP:
		if m.PathMTU < 1 || m.PathMTU > 5 || m.RNRRetryCount > 7 {
			return fmt.Errorf("cm: REP: path MTU %d (want 1..5), RNR retry count %d (want 0..7)", m.PathMTU, m.RNRRetryCount)
		}
		if m.LocalCommID == 0 || m.RemoteCommID == 0 {
			return errors.New("cm: REP with communication ID 0")
		}
	case RTU, DREQ, DREP:
		if m.LocalCommID == 0 || m.RemoteCommID == 0 {
			return fmt.Errorf("cm: %v with communication ID 0", m.Type)
		}
	case SIDRREP:
		if m.Status > SIDRNotSupported {
			return fmt.Errorf("cm: SIDR_REP status %d", m.Status)
		}
	}
	return nil
}
