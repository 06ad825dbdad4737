//go:build unix

package daemon_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/internal/redistest"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// heldSavedMarks is the node's real registry with its "saved" mark
// writes held until the test releases them: fault injection around the
// registry, not a stand-in for it.
type heldSavedMarks struct {
	fleet.Registry
	once    sync.Once
	pending chan struct{} // closed when a saved mark is held
	release chan struct{}
	written chan error // the held write's outcome, once released
}

func (h *heldSavedMarks) Mark(ctx context.Context, owner, node string, state fleet.OwnerState) (bool, error) {
	if state != fleet.OwnerSaved {
		return h.Registry.Mark(ctx, owner, node, state)
	}
	h.once.Do(func() { close(h.pending) })
	<-h.release
	ok, err := h.Registry.Mark(ctx, owner, node, state)
	select {
	case h.written <- err:
	default:
	}
	return ok, err
}

// TestShutdownWaitsForTheSavedMarks: a draining node that refused a
// routed cell of an owner it still had to save marks the owner's record
// saving, and saved once the pool's close saved it, in the background.
// Shutdown waits for that write before it closes the registry, so the
// record does not stay saving (routers would wait for the node's
// registration to end). The saved write is held until Shutdown either
// waits for it or has closed the registry without it.
func TestShutdownWaitsForTheSavedMarks(t *testing.T) {
	rd := redistest.Start(t)
	cfg, _ := netConfig(t)
	cfg.Fleet.Redis, cfg.Fleet.NodeName, cfg.Fleet.AdvertiseURL = rd.URL, "n1", "https://127.0.0.1:8443"
	p := cfg.Profiles["default"]
	p.Persist, p.Spares = true, 0
	cfg.Profiles["default"] = p
	ctx := context.Background()
	reg, err := redisreg.Open(ctx, rd.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	held := &heldSavedMarks{pending: make(chan struct{}), release: make(chan struct{}), written: make(chan error, 1)}
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(held.release) }) }
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, hclog.Debug)),
		daemon.WithMarksRegistry(func(r fleet.Registry) fleet.Registry { held.Registry = r; return held }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		let()
		_ = d.Shutdown(ctx) // once only: a second call waits for the first
	})
	ln, err := d.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.Serve(ln) }()
	local := api.NewClient(cfg.Socket)
	defer local.CloseIdleConnections()
	if res, err := local.Execute(ctx, pool.Request{Owner: "alice", Code: "x = 1"}); err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("alice's cell: %+v, %v", res, err)
	}
	placed, ok, err := reg.Place(ctx, "alice", 0, "n1", fleet.OwnerPlaced) // as a router placed her
	if err != nil || !ok {
		t.Fatalf("place alice: %+v, %v, %v", placed, ok, err)
	}
	d.Drain()
	if status, code := routedCell(t, cfg.Socket, "alice", placed.Generation); status != http.StatusServiceUnavailable || code != api.CodeDraining {
		t.Fatalf("routed cell while draining: %d %q, want 503 draining", status, code)
	}
	if rec, _, err := reg.Owner(ctx, "alice"); err != nil || rec.State != fleet.OwnerSaving {
		t.Fatalf("alice's record after the refused cell: %+v, %v; want saving", rec, err)
	}
	shut := make(chan error, 1)
	go func() { shut <- d.Shutdown(ctx) }()
	recv(t, "the saved mark's write", held.pending)
	var shutErr error
	returned := false
	testenv.WaitFor(t, "Shutdown to wait for the mark or to return without it", func() bool {
		select {
		case shutErr = <-shut:
			returned = true
			return true
		default:
			return marksWaiting()
		}
	})
	let()
	if !returned {
		shutErr = recv(t, "Shutdown", shut)
	}
	if shutErr != nil {
		t.Fatal(shutErr)
	}
	if err := recv(t, "the released mark's write", held.written); err != nil {
		t.Errorf("the saved mark failed: %v (the registry was closed before it)", err)
	}
	if rec, _, err := reg.Owner(ctx, "alice"); err != nil || rec.State != fleet.OwnerSaved {
		t.Fatalf("alice's record after Shutdown: %+v, %v; want saved", rec, err)
	}
}

// routedCell sends a cell of owner over the socket as a fleet's router
// does (with the owner's generation) and returns the status and code.
func routedCell(t *testing.T, socket, owner string, gen uint64) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "http://kernpool/v1/execute", strings.NewReader(`{"owner":"`+owner+`","code":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderOwnerGeneration, strconv.FormatUint(gen, 10))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb.Code
}

// marksWaiting reports whether a goroutine is in fleet.SaveMarks.Wait:
// Shutdown waiting for the background marks.
func marksWaiting() bool {
	for _, g := range testenv.Goroutines() {
		if strings.Contains(g, "fleet.(*SaveMarks).Wait(") {
			return true
		}
	}
	return false
}

// recv receives from ch; testenv.Patience only stops a hung test.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(testenv.Patience)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("hang: waited %s for %s", testenv.Patience, what)
	}
	var zero T
	return zero
}
