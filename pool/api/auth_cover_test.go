//go:build unix

package api_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// ParseTokenDigest takes exactly 64 hex digits, the config's form of a
// token's SHA-256, and gives back the digest TokenDigest wrote.
func TestParseTokenDigest(t *testing.T) {
	want := sha256.Sum256([]byte("secret"))
	if d, err := api.ParseTokenDigest(api.TokenDigest("secret")); err != nil || d != want {
		t.Fatalf("ParseTokenDigest(TokenDigest): %x, %v; want %x", d, err, want)
	}
	for _, bad := range []string{"", "zz", strings.Repeat("ab", 31), strings.Repeat("ab", 33), strings.Repeat("g", 64)} {
		if _, err := api.ParseTokenDigest(bad); err == nil {
			t.Errorf("ParseTokenDigest(%q): nil error", bad)
		}
	}
}

// verified is a TLS connection state whose verified chains are chains.
func verified(chains ...[]*x509.Certificate) *tls.ConnectionState {
	return &tls.ConnectionState{VerifiedChains: chains}
}

// leaf is a certificate named cn.
func leaf(cn string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
}

// Authenticate hands on a request with the principal of its bearer
// token, else of its verified client certificate; everything else but
// the readiness probe is 401 with WWW-Authenticate and the reason, and
// never reaches the API. A wrong token is refused even with a good
// certificate, so one principal cannot pass as another.
func TestAuthenticateRefusals(t *testing.T) {
	alice := &api.Principal{Name: "alice", Owners: []string{"alice"}}
	bob := &api.Principal{Name: "bob", Owners: []string{"bob"}}
	creds := &api.Credentials{
		Tokens: map[[sha256.Size]byte]*api.Principal{sha256.Sum256([]byte("alice-token")): alice},
		Certs:  map[string]*api.Principal{"bob": bob},
	}
	for _, tc := range []struct {
		name   string
		path   string
		auth   string
		tls    *tls.ConnectionState
		nilCfg bool   // the node accepts no credentials
		as     string // the principal handed on; "" for a 401
		why    string // in the 401's message
	}{
		{name: "token", auth: "Bearer alice-token", as: "alice"},
		{name: "scheme any case", auth: "bearer alice-token", as: "alice"},
		{name: "certificate", tls: verified([]*x509.Certificate{leaf("bob")}), as: "bob"},
		{name: "token over certificate", auth: "Bearer alice-token", tls: verified([]*x509.Certificate{leaf("bob")}), as: "alice"},
		{name: "probe needs nothing", path: "/v1/ready", as: "anonymous"},
		{name: "probe with no config", path: "/v1/ready", nilCfg: true, as: "anonymous"},
		{name: "wrong token", auth: "Bearer bob-token", why: "not valid"},
		{name: "wrong token, good certificate", auth: "Bearer bob-token", tls: verified([]*x509.Certificate{leaf("bob")}), why: "not valid"},
		{name: "no scheme", auth: "alice-token", why: "Bearer TOKEN"},
		{name: "other scheme", auth: "Basic alice-token", why: "Bearer TOKEN"},
		{name: "empty token", auth: "Bearer ", why: "Bearer TOKEN"},
		{name: "unknown certificate", tls: verified([]*x509.Certificate{leaf("mallory")}), why: "client certificate"},
		{name: "TLS without a verified chain", tls: verified(), why: "authentication required"},
		{name: "TLS with an empty chain", tls: verified([]*x509.Certificate{}), why: "authentication required"},
		{name: "nothing", why: "authentication required"},
		{name: "no credentials configured", auth: "Bearer alice-token", nilCfg: true, why: "accepts no credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reached *api.Principal
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = api.PrincipalOf(r)
				w.WriteHeader(http.StatusNoContent)
			})
			h := api.Authenticate(func() *api.Credentials {
				if tc.nilCfg {
					return nil
				}
				return creds
			}, next)
			path := tc.path
			if path == "" {
				path = "/v1/kernels"
			}
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.TLS = tc.tls
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if tc.as != "" {
				if rec.Code != http.StatusNoContent || reached == nil || reached.Name != tc.as {
					t.Fatalf("status %d, principal %+v; want %q handed on", rec.Code, reached, tc.as)
				}
				return
			}
			if reached != nil || rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `"code":"unauthorized"`) {
				t.Fatalf("status %d %s (reached %v); want 401 unauthorized", rec.Code, rec.Body, reached)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="kernpool"` {
				t.Errorf("WWW-Authenticate %q", got)
			}
			if !strings.Contains(rec.Body.String(), tc.why) {
				t.Errorf("401 body %s does not say %q", rec.Body, tc.why)
			}
		})
	}
}

// The principals handed on act only for their own owners: the anonymous
// probe's and a token's principal may not act for another owner, nor as
// an admin.
func TestAuthenticatedPrincipalsStayInTheirOwners(t *testing.T) {
	creds := &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{
		sha256.Sum256([]byte("alice-token")): {Name: "alice", Owners: []string{"alice"}, OwnerPrefixes: []string{"acme/"}},
	}}
	var p *api.Principal
	h := api.Authenticate(func() *api.Credentials { return creds }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p = api.PrincipalOf(r)
	}))
	for _, path := range []string{"/v1/ready", "/v1/kernels"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		h.ServeHTTP(httptest.NewRecorder(), req)
		if p == nil || p.Admin || p.Allows("bob") || p.Allows("") || p.Allows("acme") {
			t.Errorf("%s: principal %+v may act beyond its owners", path, p)
		}
	}
	if !p.Allows("alice") || !p.Allows("acme/x") {
		t.Errorf("token principal %+v refused its own owners", p)
	}
}

// A scoped credential's listing holds its own owners' checkpoints only:
// another owner's saved state is not even named.
func TestCheckpointListingByPrincipal(t *testing.T) {
	testenv.RequirePython(t)
	dir := t.TempDir()
	cfg := pool.Config{StateDir: dir, DefaultInterpreter: testenv.Python,
		Policies: map[string]pool.CellPolicy{"default": {Persist: true}}}
	p, err := pool.New(cfg)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	for _, owner := range []string{"alice", "bob"} {
		if _, err := p.Execute(testCtx(t), pool.Request{Owner: owner, Code: "x = 1"}); err != nil {
			t.Fatalf("Execute(%s): %v", owner, err)
		}
	}
	if err := p.Close(testCtx(t)); err != nil { // saves both checkpoints
		t.Fatalf("Close: %v", err)
	}
	if p, err = pool.New(cfg); err != nil {
		t.Fatalf("pool.New again: %v", err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if n := len(p.Checkpoints()); n != 2 {
		t.Fatalf("%d checkpoints saved, want 2", n)
	}
	creds := &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{
		sha256.Sum256([]byte("alice-token")): {Name: "alice", Owners: []string{"alice"}},
	}}
	h := api.NewServer(p, api.ServerConfig{}).NetworkHandler(func() *api.Credentials { return creds })
	status, body := get(t, h, "/v1/kernels", "alice-token")
	var kl api.KernelList
	if err := json.Unmarshal([]byte(body), &kl); status != http.StatusOK || err != nil {
		t.Fatalf("alice's listing: %d %s", status, body)
	}
	if len(kl.Checkpoints) != 1 || kl.Checkpoints[0].Owner != "alice" || strings.Contains(body, "bob") {
		t.Errorf("alice's listing: %s; want her checkpoint only", body)
	}
}
