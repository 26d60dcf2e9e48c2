package fi

// The capability rules of fi_getinfo(3): implied modifiers, the caps that
// apply to each side, and the checks of requested caps.

// Capability groups of fi_getinfo(3) "CAPABILITIES".
const (
	// "Primary capabilities: FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC,
	// FI_MULTICAST, FI_NAMED_RX_CTX, FI_DIRECTED_RECV, FI_VARIABLE_MSG,
	// FI_HMEM, FI_COLLECTIVE, FI_XPU". FI_XPU has no value in 1.17's headers.
	capPrimary = MSG | RMA | TAGGED | ATOMIC | MULTICAST | NAMED_RX_CTX |
		DIRECTED_RECV | VARIABLE_MSG | HMEM | COLLECTIVE
	// "Primary modifiers: FI_READ, FI_WRITE, FI_RECV, FI_SEND,
	// FI_REMOTE_READ, FI_REMOTE_WRITE"
	capMsgDir = SEND | RECV
	capRMADir = READ | WRITE | REMOTE_READ | REMOTE_WRITE
	// "Secondary capabilities: FI_MULTI_RECV, FI_SOURCE, FI_RMA_EVENT,
	// FI_SHARED_AV, FI_TRIGGER, FI_FENCE, FI_LOCAL_COMM, FI_REMOTE_COMM,
	// FI_SOURCE_ERR, FI_RMA_PMEM."
	capSecondary = MULTI_RECV | SOURCE | RMA_EVENT | SHARED_AV | TRIGGER |
		FENCE | LOCAL_COMM | REMOTE_COMM | SOURCE_ERR | RMA_PMEM
	// Capabilities in no group: FI_AV_USER_ID changes what completions
	// carry, FI_PEER is for peer providers; bits 60-63 are provider
	// specific ("60 - 63 provider specific", fabric.h).
	capOther = AV_USER_ID | Caps(PEER) | 0xf<<60
	capAll   = capPrimary | capMsgDir | capRMADir | capSecondary | capOther
	// Secondary capabilities that are reported only when requested, because
	// the man page says they cost performance ("may adversely affect
	// performance": FI_SOURCE, FI_SOURCE_ERR) or because they change
	// behaviour (capOther).
	capCostly = SOURCE | SOURCE_ERR | capOther
	// Capabilities that "apply to the transmit attributes" and "apply to the
	// receive attributes" (fi_endpoint(3)).
	capTx = MSG | RMA | TAGGED | ATOMIC | READ | WRITE | SEND | HMEM | TRIGGER |
		FENCE | MULTICAST | RMA_PMEM | NAMED_RX_CTX | COLLECTIVE
	capRx = MSG | RMA | TAGGED | ATOMIC | REMOTE_READ | REMOTE_WRITE | RECV |
		HMEM | TRIGGER | RMA_PMEM | DIRECTED_RECV | VARIABLE_MSG | MULTI_RECV |
		SOURCE | RMA_EVENT | SOURCE_ERR | COLLECTIVE
)

// mrBasicMap is what FI_MR_BASIC stands for: "The behavior of basic
// registration is equivalent to requiring the following mr_mode bits:
// FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, and FI_MR_PROV_KEY." (fi_mr(3))
const mrBasicMap = MR_VIRT_ADDR | MR_ALLOCATED | MR_PROV_KEY

// mrRMATarget are the mr_mode bits that only concern memory that peers
// access: keys, addressing, raw keys and RMA events.
const mrRMATarget = MR_RAW | MR_VIRT_ADDR | MR_PROV_KEY | MR_RMA_EVENT

// impliedCaps adds the modifiers a primary capability implies: "If no
// modifiers are specified for an applicable capability, all relevant
// modifiers are assumed." The groups are FI_MSG and FI_TAGGED with FI_SEND
// and FI_RECV, and FI_RMA and FI_ATOMIC with FI_READ, FI_WRITE,
// FI_REMOTE_READ and FI_REMOTE_WRITE.
func impliedCaps(c Caps) Caps {
	if c&(MSG|TAGGED) != 0 && c&capMsgDir == 0 {
		c |= capMsgDir
	}
	if c&(RMA|ATOMIC) != 0 && c&capRMADir == 0 {
		c |= capRMADir
	}
	return c
}

// txCaps keeps the capabilities of c that apply to a transmit context.
// A primary capability whose modifiers exclude sending (FI_MSG|FI_RECV) does
// not apply to it.
func txCaps(c Caps) Caps {
	t := c & capTx
	if c&capMsgDir != 0 && c&SEND == 0 {
		t &^= MSG | TAGGED | MULTICAST
	}
	if c&capRMADir != 0 && c&(READ|WRITE) == 0 {
		t &^= RMA | ATOMIC
	}
	return t
}

// rxCaps keeps the capabilities of c that apply to a receive context.
func rxCaps(c Caps) Caps {
	r := c & capRx
	if c&capMsgDir != 0 && c&RECV == 0 {
		r &^= MSG | TAGGED | DIRECTED_RECV | VARIABLE_MSG | MULTI_RECV
	}
	if c&capRMADir != 0 && c&(REMOTE_READ|REMOTE_WRITE) == 0 {
		r &^= RMA | ATOMIC | RMA_EVENT
	}
	return r
}

// usableSecondary returns the secondary capabilities of free that make
// sense with caps: FI_RMA_EVENT "requires that FI_REMOTE_READ and/or
// FI_REMOTE_WRITE be enabled on the endpoint", FI_RMA_PMEM "requires that
// FI_RMA be set".
func usableSecondary(caps, free Caps) Caps {
	if caps&(REMOTE_READ|REMOTE_WRITE) == 0 || caps&(RMA|ATOMIC) == 0 {
		free &^= RMA_EVENT
	}
	if caps&RMA == 0 {
		free &^= RMA_PMEM
	}
	return free
}

// rmaTarget reports whether caps (with modifiers made explicit) let peers
// access the endpoint's memory.
func rmaTarget(c Caps) bool {
	return c&(RMA|ATOMIC) != 0 && c&(REMOTE_READ|REMOTE_WRITE) != 0
}

// checkCaps returns an error if c (the caps of hints, tx_attr or rx_attr)
// breaks a rule of the CAPABILITIES section: "FI_EBADFLAGS: The specified
// endpoint or domain capability or operation flags are invalid."
func checkCaps(field string, c Caps) error {
	bad := func(format string, a ...any) error {
		return getinfoErrorf(EBADFLAGS, "%s: "+format, append([]any{field}, a...)...)
	}
	if x := c &^ capAll; x != 0 {
		return bad("%#x are not capabilities", uint64(x))
	}
	full := impliedCaps(c)
	switch {
	case c&(READ|WRITE|REMOTE_READ|REMOTE_WRITE) != 0 && c&(RMA|ATOMIC) == 0:
		// FI_READ: "This flag requires that FI_RMA and/or FI_ATOMIC be set."
		return bad("%s requires FI_RMA or FI_ATOMIC", flagText(c&capRMADir))
	case c&RMA_EVENT != 0 && full&(REMOTE_READ|REMOTE_WRITE) == 0:
		return bad("FI_RMA_EVENT requires FI_REMOTE_READ or FI_REMOTE_WRITE")
	case c&SOURCE_ERR != 0 && c&SOURCE == 0:
		return bad("FI_SOURCE_ERR must be paired with FI_SOURCE")
	case c&MULTICAST != 0 && c&MSG == 0:
		return bad("FI_MULTICAST must be paired with FI_MSG")
	case c&VARIABLE_MSG != 0 && c&(MSG|TAGGED) == 0:
		return bad("FI_VARIABLE_MSG requires FI_MSG or FI_TAGGED")
	case c&RMA_PMEM != 0 && c&RMA == 0:
		return bad("FI_RMA_PMEM requires FI_RMA")
	}
	return nil
}
