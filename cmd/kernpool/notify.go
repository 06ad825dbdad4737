package main

import (
	"net"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// sdNotify sends state ("READY=1", "STOPPING=1", "RELOADING=1") to
// systemd when it started the daemon with Type=notify (NOTIFY_SOCKET is
// set): one datagram on a Unix socket, "@" meaning the abstract
// namespace (sd_notify(3)). Without NOTIFY_SOCKET it does nothing; a
// failure is logged, never fatal.
func sdNotify(getenv func(string) string, log hclog.Logger, state string) {
	addr := getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if strings.HasPrefix(addr, "@") {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		log.Warn("sd_notify failed", "state", state, "error", err)
		return
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		log.Warn("sd_notify failed", "state", state, "error", err)
	}
}
