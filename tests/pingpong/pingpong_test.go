package main

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/fabricfs/fabricfs/core/fi"
)

// The pieces of fi_pingpong's protocol that need no peer; tests/
// pingpong_test.go runs the program against real fi_pingpong.

func TestPingpongFillPattern(t *testing.T) {
	b := make([]byte, 70)
	fillBuf(b, 0) // message 0 starts at '0' and wraps after 'Z'
	if want := integAlphabet + "01234567"; string(b) != want {
		t.Errorf("message 0 = %q, want %q", b, want)
	}
	fillBuf(b[:5], 9) // 9*7 = 63 = 1 (mod 62)
	if string(b[:5]) != "12345" {
		t.Errorf("message 9 starts %q, want 12345", b[:5])
	}
	fillBuf(b, 1<<31) // in C's unsigned int, 2^31*7 wraps to 2^31, which is 2 mod 62 (14 without the wrap)
	if b[0] != integAlphabet[2] || checkBuf(b, 1<<31) != -1 {
		t.Errorf("message 2^31 starts %q, want %q", b[0], integAlphabet[2])
	}
	b[40] ^= 1
	if i := checkBuf(b, 1<<31); i != 40 {
		t.Errorf("checkBuf found byte %d, want 40", i)
	}
}

func TestPingpongSizeList(t *testing.T) {
	all := testSizes(sizeSpec{kind: sizesAll}, ppMaxDataMsg)
	if len(all) != 46 || !slices.Equal(all[:8], []int{0, 1, 2, 3, 4, 6, 8, 12}) || all[45] != ppMaxDataMsg {
		t.Errorf("-S all = %v", all)
	}
	if got := testSizes(sizeSpec{kind: sizesDefault}, 5000); !slices.Equal(got, []int{64, 256, 1024, 4096}) {
		t.Errorf("default sizes up to 5000 = %v", got)
	}
	if got := testSizes(sizeSpec{kind: sizesOne, sizes: []int{100}}, 99); len(got) != 0 {
		t.Errorf("-S 100 over a 99-byte limit = %v, want none", got)
	}
}

func TestPingpongCount(t *testing.T) {
	for in, want := range map[string]int64{"100\x00\x00\x00\x00\x00\x00\x00": 100, "2147483647": 2147483647, "0\x00\x00\x00\x00\x00\x00\x00\x00\x00": 0} {
		if n, err := parseCount([]byte(in)); err != nil || n != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", "-1\x00\x00\x00\x00\x00\x00\x00\x00", "+1\x00\x00\x00\x00\x00\x00\x00\x00", "1 \x00\x00\x00\x00\x00\x00\x00\x00", "1\x002\x00\x00\x00\x00\x00\x00\x00", "abc"} {
		if n, err := parseCount([]byte(in)); err == nil {
			t.Errorf("parseCount(%q) = %d, want an error", in, n)
		}
	}
}

func TestPingpongSockaddr(t *testing.T) {
	for _, s := range []string{"127.0.0.1:47592", "[::1]:7", "[fe80::1]:65535"} {
		ap := netip.MustParseAddrPort(s)
		raw := encodeSockaddr(ap)
		got, err := decodeSockaddr(raw)
		if err != nil || got != ap {
			t.Errorf("%s: encoded %v %x, decoded %v, %v", s, raw.format, raw.bytes, got, err)
		}
		if raw.format == fi.SOCKADDR_IN && !bytes.Equal(raw.bytes, []byte{2, 0, 0xb9, 0xe8, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}) {
			t.Errorf("%s: sockaddr_in %x", s, raw.bytes)
		}
	}
	// Whatever the peer sends, an error or an address, never a panic.
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		b := make([]byte, r.IntN(40))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		if len(b) >= 2 && r.IntN(2) == 0 {
			b[0], b[1] = byte([]int{2, 10}[r.IntN(2)]), 0
		}
		decodeSockaddr(rawAddr{format: fi.AddrFormat(r.IntN(5)), bytes: b})
		parseCount(b)
	}
}
