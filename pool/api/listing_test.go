//go:build unix

package api_test

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// get serves one GET through h in process and returns status and body.
func get(t *testing.T, h http.Handler, path, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// listing describes a kernel listing by owner, "(spare)" for a spare.
func listing(t *testing.T, body string) []string {
	t.Helper()
	var kl api.KernelList
	if err := json.Unmarshal([]byte(body), &kl); err != nil {
		t.Fatalf("listing %q: %v", body, err)
	}
	var out []string
	for _, k := range kl.Kernels {
		if k.Spare {
			out = append(out, "(spare)")
			continue
		}
		out = append(out, k.Owner)
	}
	slices.Sort(out)
	return out
}

// The admin's listing (the Unix socket) shows every kernel, the warm
// spare too; a scoped credential's shows its own owners' only.
func TestListingByPrincipal(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.Warm = map[string]pool.Warm{"default": {Spares: 1}}
	}})
	d.exec(t, "alice", "1")
	d.exec(t, "bob", "1")
	waitFor(t, "a ready spare", func() bool {
		return slices.ContainsFunc(d.pool.List(), func(k pool.KernelInfo) bool { return k.Spare })
	})
	status, body := get(t, d.server, "/v1/kernels", "")
	if got, want := listing(t, body), []string{"(spare)", "alice", "bob"}; status != http.StatusOK || !slices.Equal(got, want) {
		t.Fatalf("admin listing: %d %v, want %v", status, got, want)
	}
	creds := &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{
		sha256.Sum256([]byte("alice-token")): {Name: "alice", Owners: []string{"alice"}},
	}}
	nh := d.server.NetworkHandler(func() *api.Credentials { return creds })
	status, body = get(t, nh, "/v1/kernels", "alice-token")
	if got, want := listing(t, body), []string{"alice"}; status != http.StatusOK || !slices.Equal(got, want) {
		t.Fatalf("alice's listing: %d %v, want %v", status, got, want)
	}
}

// An empty listing has empty arrays, not nulls (docs/openapi.json: both
// are arrays).
func TestEmptyListingHasArrays(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	status, body := get(t, d.server, "/v1/kernels", "")
	if got, want := strings.TrimSpace(body), `{"kernels":[],"checkpoints":[]}`; status != http.StatusOK || got != want {
		t.Fatalf("empty listing: %d %s, want %s", status, got, want)
	}
}

// /v1/health reports the configured max_kernels and how many more
// kernels the node may start, omitted at 0 and never negative (the
// pool's own cap may be above the one reported); neither member without
// a configured cap.
func TestHealthFreeKernels(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	d.exec(t, "a", "1")
	d.exec(t, "b", "1")
	member := func(v *int) string {
		if v == nil {
			return "absent"
		}
		return strconv.Itoa(*v)
	}
	for _, tc := range []struct {
		maxKernels        int
		wantMax, wantFree string
	}{
		{0, "absent", "absent"},
		{5, "5", "3"},
		{2, "2", "absent"},
		{1, "1", "absent"},
	} {
		srv := api.NewServer(d.pool, api.ServerConfig{MaxKernels: tc.maxKernels})
		status, body := get(t, srv, "/v1/health", "")
		var h struct {
			Kernels     int  `json:"kernels"`
			MaxKernels  *int `json:"max_kernels"`
			FreeKernels *int `json:"free_kernels"`
		}
		if err := json.Unmarshal([]byte(body), &h); err != nil || status != http.StatusOK || h.Kernels != 2 {
			t.Fatalf("health: %d %q, %v; want 200 with 2 kernels", status, body, err)
		}
		if gotMax, gotFree := member(h.MaxKernels), member(h.FreeKernels); gotMax != tc.wantMax || gotFree != tc.wantFree {
			t.Errorf("max_kernels %d with 2 kernels: max_kernels %s, free_kernels %s; want %s, %s",
				tc.maxKernels, gotMax, gotFree, tc.wantMax, tc.wantFree)
		}
	}
}

// A warm spare, which the admin's listing shows, is the admin's to kill
// by id; a scoped credential gets 404 for it, as for a kernel that does
// not exist (a spare has no owner it may act for).
func TestKillSpareByID(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.Warm = map[string]pool.Warm{"default": {Spares: 1}}
	}})
	var spare string
	waitFor(t, "a ready spare", func() bool {
		for _, k := range d.pool.List() {
			if k.Spare {
				spare = k.ID
				return true
			}
		}
		return false
	})
	creds := &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{
		sha256.Sum256([]byte("alice-token")): {Name: "alice", Owners: []string{"alice"}},
	}}
	req := httptest.NewRequest(http.MethodDelete, "/v1/kernels/"+spare, nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	rec := httptest.NewRecorder()
	d.server.NetworkHandler(func() *api.Credentials { return creds }).ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), api.CodeNotFound) {
		t.Fatalf("alice's kill of the spare: %d %s, want 404 %s", rec.Code, rec.Body, api.CodeNotFound)
	}
	if err := d.client.Kill(testCtx(t), spare); err != nil {
		t.Fatalf("the admin's kill of the spare: %v", err)
	}
	if slices.ContainsFunc(d.pool.List(), func(k pool.KernelInfo) bool { return k.ID == spare }) {
		t.Fatal("the killed spare is still listed")
	}
}

// networkClients serves d's API over loopback HTTP with creds (closed at
// the test's end) and returns a maker of network clients by bearer token.
func networkClients(t *testing.T, d *daemon, creds *api.Credentials) func(token string) *api.Client {
	t.Helper()
	srv := httptest.NewServer(d.server.NetworkHandler(func() *api.Credentials { return creds }))
	t.Cleanup(srv.Close)
	return func(token string) *api.Client {
		c, err := api.NewNetworkClient(srv.URL, api.NetworkOptions{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
}
