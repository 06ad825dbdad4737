//go:build unix

package api_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// A streaming request answered with a plain JSON result (no event
// stream: a daemon or router that does not stream) is decoded as the
// result; a malformed one is a protocol error.
func TestExecuteStreamTakesAPlainAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // output; "" expects ErrProtocol
	}{
		{"result", `{"status":"success","output":"plain\n"}`, "plain\n"},
		{"malformed", `{"status":`, ""},
	} {
		var cc connCounter
		c := fakeDaemon(t, &cc, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, tc.body)
		})
		res, err := c.ExecuteStream(testCtx(t), pool.Request{Code: "1"}, nil)
		switch {
		case tc.want == "" && (res != nil || !errors.Is(err, api.ErrProtocol)):
			t.Errorf("%s: %+v, %v; want a protocol error", tc.name, res, err)
		case tc.want != "" && (err != nil || res == nil || res.Status != pool.StatusSuccess || res.Output != tc.want):
			t.Errorf("%s: %+v, %v; want a success printing %q", tc.name, res, err, tc.want)
		}
	}
}

// A network node that accepts a connection and never completes the TLS
// handshake does not hold the client: it gives up on its own (the dial
// and handshake bound, 5 s), well within the caller's context.
func TestNetworkClientHandshakeBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			held <- c // says nothing
		}
	}()
	c, err := api.NewNetworkClient("https://"+ln.Addr().String(), api.NetworkOptions{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx := testCtx(t)
	_, err = c.Health(ctx)
	if !errors.Is(err, api.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("a node that never answers the handshake: %v (context: %v), want the client's own bound", err, ctx.Err())
	}
	_ = recv(t, "the held connection", held).Close()
}

// An event stream broken before its result is an error, never a nil
// result with a nil error: a protocol error when the daemon's stream is
// cut, the context's error when the caller canceled.
func TestExecuteStreamBroken(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		var cc connCounter
		c := fakeDaemon(t, &cc, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, `{"event":"stdout","text":"a"}`+"\n")
			w.(http.Flusher).Flush()
			if cancel {
				<-r.Context().Done() // until the client goes
				return
			}
			_, _ = io.WriteString(w, `{"event":`) // cut mid-event
		})
		ctx, stop := context.WithCancel(testCtx(t))
		res, err := c.ExecuteLive(ctx, pool.Request{Code: "1"}, nil, func(api.Event) {
			if cancel {
				stop()
			}
		})
		stop()
		want := api.ErrProtocol
		if cancel {
			want = context.Canceled
		}
		if res != nil || !errors.Is(err, want) {
			t.Errorf("canceled %v: %+v, %v; want %v", cancel, res, err, want)
		}
	}
}

// InterruptOwner names the mode only when given one: the daemon then
// interrupts that mode's kernel of the owner, not all of them.
func TestInterruptOwnerRequests(t *testing.T) {
	uris := make(chan string, 2)
	var cc connCounter
	c := fakeDaemon(t, &cc, func(w http.ResponseWriter, r *http.Request) {
		uris <- r.RequestURI
		_, _ = io.WriteString(w, `{"interrupted":["k1"]}`+"\n")
	})
	for _, tc := range []struct{ mode, uri string }{
		{"", "/v1/owners/o%2F1/interrupt"},
		{"gpu big", "/v1/owners/o%2F1/interrupt?mode=gpu+big"},
	} {
		ids, err := c.InterruptOwner(testCtx(t), "o/1", tc.mode)
		if err != nil || len(ids) != 1 || ids[0] != "k1" {
			t.Fatalf("mode %q: %v, %v", tc.mode, ids, err)
		}
		if got := recv(t, "the request", uris); got != tc.uri {
			t.Errorf("mode %q: the daemon saw %s, want %s", tc.mode, got, tc.uri)
		}
	}
}

// A request with a JSON body says so (Content-Type: application/json,
// as a router or proxy in front of the daemon may require); one without
// a body names no type.
func TestClientJSONContentType(t *testing.T) {
	types := make(chan string, 1)
	var cc connCounter
	c := fakeDaemon(t, &cc, func(w http.ResponseWriter, r *http.Request) {
		types <- r.Method + " " + r.Header.Get("Content-Type")
		_, _ = io.WriteString(w, `{"status":"success"}`+"\n")
	})
	if _, err := c.Execute(testCtx(t), pool.Request{Code: "1"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, "the execute request", types); got != "POST application/json" {
		t.Errorf("execute: %q, want POST application/json", got)
	}
	if _, err := c.Health(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, "the health request", types); got != "GET " {
		t.Errorf("health: %q, want a GET with no Content-Type", got)
	}
}
