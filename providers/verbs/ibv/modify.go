package ibv

import (
	"syscall"

	"github.com/fabricfs/fabricfs/providers/verbs/roce"
)

// A transition is one allowed change of QP state and the attributes it
// requires and allows, for RC and for UD (GSI has its own required set
// on RESET -> INIT).
type transition struct {
	rcReq, rcOpt, udReq, udOpt QPAttrMask
}

// transitions is the IB specification's QP state table as
// ibv_modify_qp(3) lists it and Linux's ib_modify_qp_is_ok checks it,
// restricted to the attributes this device has. A missing entry is a
// transition that does not exist.
var transitions = map[[2]QPState]transition{
	{QPSReset, QPSReset}: {},
	{QPSReset, QPSInit}: {
		rcReq: QPPKeyIndex | QPPort | QPAccessFlags,
		udReq: QPPKeyIndex | QPPort | QPQKey,
	},
	{QPSInit, QPSInit}: {
		rcOpt: QPPKeyIndex | QPPort | QPAccessFlags,
		udOpt: QPPKeyIndex | QPPort | QPQKey,
	},
	{QPSInit, QPSRTR}: {
		rcReq: QPAV | QPPathMTU | QPDestQPN | QPRQPSN | QPMaxDestRdAtomic | QPMinRNRTimer,
		rcOpt: QPAccessFlags | QPPKeyIndex,
		udOpt: QPPKeyIndex | QPQKey,
	},
	{QPSRTR, QPSRTS}: {
		rcReq: QPSQPSN | QPTimeout | QPRetryCnt | QPRNRRetry | QPMaxQPRdAtomic,
		rcOpt: QPAccessFlags | QPMinRNRTimer,
		udReq: QPSQPSN,
		udOpt: QPQKey,
	},
	{QPSRTS, QPSRTS}: {rcOpt: QPAccessFlags | QPMinRNRTimer, udOpt: QPQKey},
	{QPSRTS, QPSSQD}: {},
	{QPSSQD, QPSRTS}: {rcOpt: QPAccessFlags | QPMinRNRTimer, udOpt: QPQKey},
	{QPSSQD, QPSSQD}: {
		rcOpt: QPPort | QPAV | QPTimeout | QPRetryCnt | QPRNRRetry | QPMaxQPRdAtomic | QPMaxDestRdAtomic |
			QPAccessFlags | QPPKeyIndex | QPMinRNRTimer,
		udOpt: QPPKeyIndex | QPQKey,
	},
	{QPSSQE, QPSRTS}: {udOpt: QPQKey},
}

// allMask is every attribute bit this device knows.
const allMask = QPState_ | QPAccessFlags | QPPKeyIndex | QPPort | QPQKey | QPAV | QPPathMTU | QPTimeout |
	QPRetryCnt | QPRNRRetry | QPRQPSN | QPMaxQPRdAtomic | QPMinRNRTimer | QPSQPSN | QPMaxDestRdAtomic | QPDestQPN

// Modify is ibv_modify_qp: it checks the transition and the attributes
// the IB state machine requires and allows for it (EINVAL otherwise).
// Without QPState_ in mask the QP stays in its state and the attributes
// are those of that state's self-transition. Any state but RESET may go
// to ERR, which flushes every outstanding work request, and any state to
// RESET, which discards them.
func (qp *QP) Modify(a *QPAttr, mask QPAttrMask) error {
	if a == nil {
		return errorf(syscall.EINVAL, "modify qp: no attributes")
	}
	qp.mu.Lock()
	defer qp.unlock()
	if qp.dead {
		return errorf(syscall.EINVAL, "modify qp: QP destroyed")
	}
	cur, next := qp.attr.State, qp.attr.State
	if mask&QPState_ != 0 {
		next = a.State
	}
	if err := qp.checkModify(a, mask, cur, next); err != nil {
		return err
	}
	qp.apply(a, mask)
	if mask&QPMaxDestRdAtomic != 0 {
		qp.resizeRes(max(1, int(qp.attr.MaxDestRdAtomic)))
	}
	switch {
	case next == QPSReset:
		qp.reset()
	case next == QPSErr:
		if cur != QPSErr {
			qp.toError()
		}
	case cur == QPSInit && next == QPSRTR:
		qp.resp.epsn = qp.attr.RQPSN
	case cur == QPSRTR && next == QPSRTS:
		qp.udPSN = qp.attr.SQPSN
		if qp.init.Type == QPTRC {
			qp.startRequester()
		}
	}
	qp.attr.State = next
	if next == QPSRTS && qp.init.Type == QPTRC {
		qp.reqRun()
	}
	return nil
}

// checkModify checks a modification from state cur to next. qp.mu is
// held.
func (qp *QP) checkModify(a *QPAttr, mask QPAttrMask, cur, next QPState) error {
	t, ok := transitions[[2]QPState{cur, next}]
	if !ok && next == QPSErr && cur != QPSReset {
		t, ok = transition{}, true
	}
	if !ok && next == QPSReset {
		t, ok = transition{}, true
	}
	if !ok {
		return errorf(syscall.EINVAL, "modify qp %#x: no transition from state %d to %d", qp.qpn, cur, next)
	}
	req, opt := t.rcReq, t.rcOpt
	if qp.init.Type != QPTRC {
		req, opt = t.udReq, t.udOpt
		if qp.init.Type == QPTGSI && cur == QPSReset && next == QPSInit {
			req = QPPKeyIndex | QPQKey // GSI has no port to give
			opt = QPPort
		}
	}
	switch {
	case mask&^allMask != 0:
		return errorf(syscall.EINVAL, "modify qp %#x: unknown attribute mask bits %#x", qp.qpn, uint32(mask&^allMask))
	case mask&req != req:
		return errorf(syscall.EINVAL, "modify qp %#x: state %d to %d needs attributes %#x, got %#x", qp.qpn, cur, next, uint32(req), uint32(mask))
	case mask&^(req|opt|QPState_) != 0:
		return errorf(syscall.EINVAL, "modify qp %#x: state %d to %d does not take attributes %#x", qp.qpn, cur, next, uint32(mask&^(req|opt|QPState_)))
	}
	return qp.checkValues(a, mask)
}

// checkValues checks the values of the attributes in mask.
func (qp *QP) checkValues(a *QPAttr, mask QPAttrMask) error {
	const remote = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessLocalWrite
	bad := func(what string, v any) error {
		return errorf(syscall.EINVAL, "modify qp %#x: %s %v", qp.qpn, what, v)
	}
	switch {
	case mask&QPPKeyIndex != 0 && a.PKeyIndex != 0:
		return bad("P_Key index (the device has one P_Key, index 0)", a.PKeyIndex)
	case mask&QPPort != 0 && a.PortNum != 1:
		return bad("port (the device has port 1)", a.PortNum)
	case mask&QPAccessFlags != 0 && a.AccessFlags&^remote != 0:
		return bad("access flags", a.AccessFlags)
	case mask&QPQKey != 0 && qp.init.Type == QPTGSI && a.QKey != GSIQKey:
		return bad("Q_Key (QP1's is 0x80010000)", a.QKey)
	case mask&QPPathMTU != 0 && (a.PathMTU.Bytes() == 0 || a.PathMTU > qp.dev.mtu):
		return bad("path MTU", a.PathMTU)
	case mask&QPDestQPN != 0 && a.DestQPNum > roce.QPNMask:
		return bad("destination QP number", a.DestQPNum)
	case mask&QPRQPSN != 0 && a.RQPSN > roce.PSNMask:
		return bad("receive PSN", a.RQPSN)
	case mask&QPSQPSN != 0 && a.SQPSN > roce.PSNMask:
		return bad("send PSN", a.SQPSN)
	case mask&QPMinRNRTimer != 0 && a.MinRNRTimer > 31:
		return bad("minimum RNR timer", a.MinRNRTimer)
	case mask&QPTimeout != 0 && a.Timeout > 31:
		return bad("timeout", a.Timeout)
	case mask&QPRetryCnt != 0 && a.RetryCnt > 7:
		return bad("retry count", a.RetryCnt)
	case mask&QPRNRRetry != 0 && a.RNRRetry > 7:
		return bad("RNR retry count", a.RNRRetry)
	case mask&QPMaxQPRdAtomic != 0 && int(a.MaxRdAtomic) > deviceAttr.MaxQPInitRdAtom:
		return bad("max_rd_atomic", a.MaxRdAtomic)
	case mask&QPMaxDestRdAtomic != 0 && int(a.MaxDestRdAtomic) > deviceAttr.MaxQPRdAtom:
		return bad("max_dest_rd_atomic", a.MaxDestRdAtomic)
	}
	if mask&QPAV != 0 {
		if _, err := qp.dev.checkDest(a.AH.Dest); err != nil {
			return err
		}
	}
	return nil
}

// apply sets the attributes in mask. qp.mu is held.
func (qp *QP) apply(a *QPAttr, mask QPAttrMask) {
	t := &qp.attr
	for _, f := range []struct {
		bit QPAttrMask
		set func()
	}{
		{QPPKeyIndex, func() { t.PKeyIndex = a.PKeyIndex }},
		{QPPort, func() { t.PortNum = a.PortNum }},
		{QPQKey, func() { t.QKey = a.QKey }},
		{QPAccessFlags, func() { t.AccessFlags = a.AccessFlags }},
		{QPPathMTU, func() { t.PathMTU = a.PathMTU }},
		{QPDestQPN, func() { t.DestQPNum = a.DestQPNum }},
		{QPRQPSN, func() { t.RQPSN = a.RQPSN }},
		{QPMaxDestRdAtomic, func() { t.MaxDestRdAtomic = a.MaxDestRdAtomic }},
		{QPMinRNRTimer, func() { t.MinRNRTimer = a.MinRNRTimer }},
		{QPSQPSN, func() { t.SQPSN = a.SQPSN }},
		{QPTimeout, func() { t.Timeout = a.Timeout }},
		{QPRetryCnt, func() { t.RetryCnt = a.RetryCnt }},
		{QPRNRRetry, func() { t.RNRRetry = a.RNRRetry }},
		{QPMaxQPRdAtomic, func() { t.MaxRdAtomic = a.MaxRdAtomic }},
		{QPAV, func() {
			t.AH = a.AH
			qp.dest, _ = qp.dev.checkDest(a.AH.Dest)
			qp.path = roce.Path{Src: qp.dev.addr, Dst: qp.dest}
		}},
	} {
		if mask&f.bit != 0 {
			f.set()
		}
	}
	if qp.init.Type == QPTGSI {
		t.QKey = GSIQKey
	}
}
