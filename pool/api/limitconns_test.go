//go:build unix

package api_test

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool/api"
)

// LimitConns serves max connections at once, answers the next one 503,
// and serves a new one once a served one closed; max 0 is the default
// cap, not a cap of none.
func TestLimitConnsCap(t *testing.T) {
	for _, max := range []int{2, 0} {
		sock := filepath.Join(shortTempDir(t), "l.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		l := api.LimitConns(ln, max)
		t.Cleanup(func() { _ = l.Close() })
		accepted := make(chan net.Conn, 8)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					close(accepted)
					return
				}
				_, _ = c.Write([]byte("served\n"))
				accepted <- c
			}
		}()
		// first line of a new connection: "served", or the refusal's
		// status line.
		first := func() string {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			line, _ := bufio.NewReader(c).ReadString('\n')
			return strings.TrimSpace(line)
		}
		want := []string{"served", "served", "HTTP/1.1 503 Service Unavailable"}
		if max == 0 {
			want = []string{"served", "served", "served"} // far below 256
		}
		var served []net.Conn
		for i, w := range want {
			if got := first(); got != w {
				t.Fatalf("max %d, connection %d: %q, want %q", max, i+1, got, w)
			}
			if w == "served" {
				served = append(served, recv(t, "the accepted connection", accepted))
			}
		}
		if max == 2 {
			_ = served[0].Close() // its slot is free again
			if got := first(); got != "served" {
				t.Fatalf("max 2, after one closed: %q, want served", got)
			}
			served = append(served, recv(t, "the accepted connection", accepted))
		}
		_ = l.Close()
		recv(t, "the accept loop's end", accepted) // drains; closed at the end
		for _, c := range served {
			_ = c.Close()
		}
	}
}
