//go:build !unix

package api

import (
	"context"
	"net"
	"net/http"
)

// newTransport is the Client's round tripper where there is no
// connKeeper (keeper_unix.go): net/http's Transport.
func newTransport(socket string) transport {
	dialer := &net.Dialer{Timeout: dialTimeout}
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: maxIdleConns,
		IdleConnTimeout:     idleConnTimeout,
		DisableCompression:  true,
	}
}
