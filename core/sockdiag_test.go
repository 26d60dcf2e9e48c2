package core

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// parseDiagReply takes any bytes without panicking, and reads back the uid
// and cookie of a well-formed answer.
func FuzzParseDiagReply(f *testing.F) {
	msg := make([]byte, nlmsgHdrLen+inetDiagMsgLen)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint32(msg[nlmsgHdrLen+inetDiagUIDOff:], 1000)
	ne.PutUint32(msg[nlmsgHdrLen+inetDiagMsgIDOff+40:], 7)
	f.Add(msg)
	f.Add([]byte{20, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		uid, cookie, err := parseDiagReply(b)
		if err == nil && len(b) == len(msg) && string(b) == string(msg) && (uid != 1000 || cookie != 7) {
			t.Fatalf("uid %d cookie %d, want 1000 and 7", uid, cookie)
		}
	})
}
