package verbs

import (
	"fmt"

	"github.com/fabricfs/fabricfs/core"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/providers/verbs/cm"
	"github.com/fabricfs/fabricfs/providers/verbs/ibv"
)

// Attribute values. Where fabricfs behaves as libfabric 1.17's verbs
// provider does, they are that provider's (prov/verbs/src/verbs_info.c,
// fi_verbs.c); docs/verbs.md lists where they differ and why.
const (
	DefaultTxSize = 384 // tx_attr.size: libfabric verbs's def_tx_size
	DefaultRxSize = 384 // rx_attr.size: def_rx_size
	IovLimit      = 4   // tx/rx and rma iov_limit: libfabric verbs's def_tx_iov_limit; core gathers and scatters segments (core/iov.go)
	MRKeySize     = 4   // domain_attr.mr_key_size: sizeof(ibv_sge.lkey)
	CQDataSize    = 4   // domain_attr.cq_data_size: sizeof(ibv_send_wr.imm_data)
	CtxCnt        = 1024
	// CQCnt is domain_attr.cq_cnt. libfabric's verbs reports the device's
	// max_cq, but a device CQ here is one per QP (ep_cnt counts those);
	// the application's CQs are core's, as in the tcp domain, so the
	// domain reports what tcp does.
	CQCnt = 256
	// MaxErrData is domain_attr.max_err_data: 0, where libfabric's verbs
	// says 255 (its vendor_err): completions carry no error data here
	// (the ring's completion entry has no room for it).
	MaxErrData = 0
	// MaxMsgSize bounds max_msg_size of FI_EP_MSG (the device's largest
	// memory region otherwise): the size of the region a receive without
	// a buffer gets and of each domain's discard region (mem.go).
	MaxMsgSize = 1 << 30
	// MaxPrivateData is the private data of connect, accept and reject:
	// libfabric verbs's cm_data_size (VERBS_CM_DATA_SIZE, 56 - 1).
	MaxPrivateData = cm.MaxPrivateData
	dgramSuffix    = "-dgram"
)

var provVersion = fi.MakeVersion(1, 0)

// Capabilities: VERBS_MSG_CAPS (atomics: atomic.go) with FI_RMA_EVENT
// (the peers' RMA and atomics reach the target's counters:
// qpBase.executed) and FI_FENCE (core's: EP.fenced), and VERBS_DGRAM_CAPS.
const (
	domainCaps  = fi.LOCAL_COMM | fi.REMOTE_COMM
	msgTxCaps   = fi.MSG | fi.SEND | fi.RMA | fi.READ | fi.WRITE | fi.ATOMIC | fi.FENCE
	msgRxCaps   = fi.MSG | fi.RECV | fi.RMA | fi.REMOTE_READ | fi.REMOTE_WRITE | fi.ATOMIC | fi.RMA_EVENT
	msgCaps     = msgTxCaps | msgRxCaps | domainCaps
	dgramTxCaps = fi.MSG | fi.SEND
	dgramRxCaps = fi.MSG | fi.RECV
	dgramCaps   = dgramTxCaps | dgramRxCaps | domainCaps
	// layerCaps may be asked of an FI_EP_MSG endpoint by rxm (FI_TAGGED)
	// but are not offered: the endpoint's messages are untagged and rxm
	// carries its tags in its own header.
	layerCaps = fi.TAGGED
	// msgOrder is VERBS_MSG_ORDER: an RC QP executes its send queue in
	// order.
	msgOrder = fi.ORDER_RAR | fi.ORDER_RMA_RAR | fi.ORDER_ATOMIC_RAR |
		fi.ORDER_RAW | fi.ORDER_RMA_RAW | fi.ORDER_ATOMIC_RAW |
		fi.ORDER_RAS |
		fi.ORDER_WAW | fi.ORDER_RMA_WAW | fi.ORDER_ATOMIC_WAW |
		fi.ORDER_WAS | fi.ORDER_SAW | fi.ORDER_SAS
	// mrMode is libfabric verbs's OFI_MR_BASIC_MAP | FI_MR_LOCAL. The
	// device registers a region at the address its attr/iova gives, so
	// FI_MR_VIRT_ADDR holds for an application that sets iova to its
	// buffer's address (the libfabric provider does); getinfo reports the
	// bit only to applications that support it (core/fi's mrPreferred),
	// others address regions by offset (iova 0).
	mrMode = fi.MR_LOCAL | fi.MR_VIRT_ADDR | fi.MR_ALLOCATED | fi.MR_PROV_KEY
)

// maxMsgSize is max_msg_size of FI_EP_MSG on device a.
func maxMsgSize(a ibv.DeviceAttr) uint64 {
	return min(a.MaxMRSize, MaxMsgSize)
}

// fabricName is libfabric's fabric name of an IB-transport device:
// "IB-0x" and the GID's subnet prefix, its first 8 bytes (0 for the
// IPv4-mapped GID of an IPv4 device).
func fabricName(gid [16]byte) string {
	var prefix uint64
	for _, b := range gid[:8] {
		prefix = prefix<<8 | uint64(b)
	}
	return fmt.Sprintf("IB-0x%x", prefix)
}

// baseInfo is what both entries of a device share.
func baseInfo(d *device, caps fi.Caps) *fi.Info {
	a := d.attr
	src := fi.SockAddr(d.addr(0))
	txSize := min(DefaultTxSize, uint64(a.MaxQPWR))
	rxSize := txSize
	if a.MaxSRQWR > 0 {
		rxSize = min(rxSize, uint64(a.MaxSRQWR))
	}
	return &fi.Info{
		Caps:       caps,
		AddrFormat: src.Format,
		SrcAddr:    &src,
		TxAttr: &fi.TxAttr{
			MsgOrder:    msgOrder,
			CompOrder:   fi.ORDER_STRICT,
			InjectSize:  uint64(a.MaxInlineData),
			Size:        txSize,
			IovLimit:    IovLimit,
			RMAIovLimit: IovLimit, // libfabric's verbs: "iov limit is same for both regular messages and RMA"
		},
		RxAttr: &fi.RxAttr{
			Mode:      fi.RX_CQ_DATA,
			MsgOrder:  msgOrder,
			CompOrder: fi.ORDER_STRICT | fi.ORDER_DATA,
			Size:      rxSize,
			IovLimit:  IovLimit,
		},
		EPAttr: &fi.EPAttr{
			ProtocolVersion: 1,
			TxCtxCnt:        1,
			RxCtxCnt:        1,
		},
		DomainAttr: &fi.DomainAttr{
			Name:            d.name,
			Threading:       fi.THREAD_SAFE,
			ControlProgress: fi.PROGRESS_AUTO,
			DataProgress:    fi.PROGRESS_AUTO,
			ResourceMgmt:    fi.RM_ENABLED,
			AVType:          fi.AV_UNSPEC,
			MRMode:          mrMode,
			MRKeySize:       MRKeySize,
			CQDataSize:      CQDataSize,
			CQCnt:           CQCnt,
			CntrCnt:         CQCnt, // the tree's counters, as the tcp domain's
			EPCnt:           uint64(a.MaxQP),
			TxCtxCnt:        min(CtxCnt, uint64(a.MaxQP)),
			RxCtxCnt:        min(CtxCnt, uint64(a.MaxQP)),
			// An endpoint has one transmit and one receive context
			// (no scalable endpoints), where libfabric's verbs says 1024.
			MaxEPTxCtx:  1,
			MaxEPRxCtx:  1,
			MaxEPStxCtx: min(core.SharedCtxEPs, uint64(a.MaxQP)),
			MaxEPSrxCtx: min(core.SharedCtxEPs, uint64(a.MaxQP)),
			MRIovLimit:  1,
			Caps:        domainCaps,
			MaxErrData:  MaxErrData,
			MRCnt:       uint64(a.MaxMR),
		},
		FabricAttr: &fi.FabricAttr{
			Name:        fabricName(d.dev.GID()),
			ProvName:    ProvName,
			ProvVersion: provVersion,
			APIVersion:  fi.APIVersion,
		},
	}
}

// msgInfo is a device's FI_EP_MSG entry: RC queue pairs, connected by
// the connection manager (cm.go).
func msgInfo(d *device) *fi.Info {
	in := baseInfo(d, msgCaps)
	in.TxAttr.Caps, in.RxAttr.Caps = msgTxCaps, msgRxCaps
	max := maxMsgSize(d.attr)
	in.EPAttr.Type, in.EPAttr.Protocol = fi.EP_MSG, fi.PROTO_RDMA_CM_IB_RC
	in.EPAttr.MaxMsgSize, in.EPAttr.MaxOrderRAWSize, in.EPAttr.MaxOrderWAWSize = max, max, max
	return in
}

// dgramInfo is a device's FI_EP_DGRAM entry: UD queue pairs, messages of
// at most the path MTU.
func dgramInfo(d *device) *fi.Info {
	in := baseInfo(d, dgramCaps)
	in.TxAttr.Caps, in.RxAttr.Caps = dgramTxCaps, dgramRxCaps
	max := uint64(d.attr.ActiveMTU.Bytes())
	in.EPAttr.Type, in.EPAttr.Protocol = fi.EP_DGRAM, fi.PROTO_IB_UD
	in.EPAttr.MaxMsgSize, in.EPAttr.MaxOrderRAWSize, in.EPAttr.MaxOrderWAWSize = max, max, max
	in.DomainAttr.Name = d.name + dgramSuffix
	return in
}
