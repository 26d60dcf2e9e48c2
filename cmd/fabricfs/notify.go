package main

import (
	"log"
	"net"
	"os"
)

// notify tells the service manager the daemon's state, as sd_notify(3)
// does: one datagram of `KEY=VALUE` lines to the unix socket named by
// $NOTIFY_SOCKET (a name starting with @ is in the abstract namespace,
// which package net maps). Without NOTIFY_SOCKET (not started by systemd
// with Type=notify) it does nothing; a failure is logged, never fatal.
func notify(state string) {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		log.Printf("sd_notify: %v", err)
		return
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		log.Printf("sd_notify: %v", err)
	}
}
