package roce

// PSNAdd returns psn+n modulo 2^24; n may be negative.
func PSNAdd(psn uint32, n int) uint32 {
	return uint32(int64(psn)+int64(n)) & PSNMask
}

// PSNDiff returns a-b as a signed distance modulo 2^24, in [-2^23, 2^23):
// positive when a is after b.
func PSNDiff(a, b uint32) int32 {
	return int32((a-b)<<8) >> 8
}

// PSNCompare returns -1, 0 or +1 as a is before, equal to or after b,
// modulo 2^24 (the half of the PSN space before b counts as before).
func PSNCompare(a, b uint32) int {
	switch d := PSNDiff(a, b); {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}
