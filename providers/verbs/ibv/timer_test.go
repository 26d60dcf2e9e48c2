package ibv

import (
	"net"
	"testing"
	"time"
)

// TestQueued: queued sees a datagram waiting in the socket, which is
// what holds a tail-loss probe back, and nothing in an empty one.
func TestQueued(t *testing.T) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	must(t, err)
	defer conn.Close()
	raw, err := conn.SyscallConn()
	must(t, err)
	d := &Device{conn: conn, raw: raw}
	if d.queued() {
		t.Fatal("queued on an empty socket")
	}
	from, err := net.DialUDP("udp4", nil, conn.LocalAddr().(*net.UDPAddr))
	must(t, err)
	defer from.Close()
	_, err = from.Write([]byte("ack"))
	must(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for !d.queued() {
		if time.Now().After(deadline) {
			t.Fatal("a datagram waits in the socket and queued does not see it")
		}
		time.Sleep(time.Millisecond)
	}
	buf := make([]byte, 16)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = conn.ReadFromUDP(buf)
	must(t, err)
	if d.queued() {
		t.Error("queued after the only datagram was read")
	}
}
