package roce

import "time"

// rnrTimer is the IB specification's table of RNR NAK timer codes (rxe's
// rnrnak_usec, ib_verbs.h's IB_RNR_TIMER_*), in units of 10 us. Code 0 is
// the longest wait, 655.36 ms.
var rnrTimer = [32]uint32{
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
	384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
}

// RNRTimer returns how long a requester waits after an RNR NAK with timer
// code (0..31): 0.01 ms for code 1 up to 491.52 ms for 31, and 655.36 ms
// for 0. ok is false for a code above 31.
func RNRTimer(code uint8) (d time.Duration, ok bool) {
	if int(code) >= len(rnrTimer) {
		return 0, false
	}
	return time.Duration(rnrTimer[code]) * 10 * time.Microsecond, true
}

// RetransmitTimeout returns a QP's local ACK timeout for its 5-bit timeout
// attribute: 4.096 us * 2^timeout. Timeout 0 means wait forever and
// returns 0. ok is false for a value above 31.
func RetransmitTimeout(timeout uint8) (d time.Duration, ok bool) {
	switch {
	case timeout > 31:
		return 0, false
	case timeout == 0:
		return 0, true
	}
	return 4096 * time.Nanosecond << timeout, true
}
