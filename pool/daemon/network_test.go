package daemon_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// The tokens of the network tests, and what their config blocks allow.
const (
	aliceToken = "kp_alice_0123456789abcdef0123456789abcdef"
	acmeToken  = "kp_acme_0123456789abcdef0123456789abcdef"
	adminToken = "kp_admin_0123456789abcdef0123456789abcdef"
)

// netNode is a real daemon serving its Unix socket and a TLS listener on
// loopback, with a CA of the test's own.
type netNode struct {
	d      *daemon.Daemon
	cfg    *daemon.Config
	url    string
	ca     *testCA
	local  *api.Client // on the Unix socket
	served chan error
}

func netConfig(t testing.TB) (*daemon.Config, *testCA) {
	cfg := testConfig(t)
	ca := newTestCA(t, filepath.Dir(cfg.StateDir), "kp")
	n := &cfg.Network
	n.Listen = "127.0.0.1:0"
	n.TLSCert, n.TLSKey = ca.issue(t, "node1", true)
	n.TLSClientCA = ca.file
	n.Tokens = []daemon.Credential{
		{Name: "alice", SHA256: api.TokenDigest(aliceToken), Owners: []string{"alice"}},
		{Name: "acme", SHA256: api.TokenDigest(acmeToken), OwnerPrefixes: []string{"acme/"}},
		{Name: "ops", SHA256: api.TokenDigest(adminToken), Admin: true},
	}
	n.ClientCerts = []daemon.Credential{{Name: "bob-gateway", Owners: []string{"bob"}}}
	return cfg, ca
}

func startNetNode(t testing.TB, cfg *daemon.Config, ca *testCA) *netNode {
	t.Helper()
	ctx := context.Background()
	level := hclog.Debug
	if _, bench := t.(*testing.B); bench {
		level = hclog.Warn // a log line per request would be measured
	}
	d, err := daemon.New(ctx, cfg, daemon.WithLogger(testenv.Logger(t, level)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := d.Listen()
	if err != nil {
		_ = d.Shutdown(ctx)
		t.Fatal(err)
	}
	nln, err := d.ListenNetwork()
	if err != nil {
		_ = ln.Close()
		_ = d.Shutdown(ctx)
		t.Fatal(err)
	}
	n := &netNode{d: d, cfg: cfg, ca: ca, url: "https://" + nln.Addr().String(), local: api.NewClient(cfg.Socket), served: make(chan error, 2)}
	go func() { n.served <- d.Serve(ln) }()
	go func() { n.served <- d.ServeNetwork(nln) }()
	t.Cleanup(func() {
		n.local.CloseIdleConnections()
		_ = d.Shutdown(context.Background())
	})
	return n
}

// client is a network client with token, or with the client
// certificate of cn when token is empty.
func (n *netNode) client(t testing.TB, token, cn string) *api.Client {
	t.Helper()
	opts := api.NetworkOptions{Token: token, CAFile: n.ca.file}
	if cn != "" {
		opts.CertFile, opts.KeyFile = n.ca.issue(t, cn, false)
	}
	c, err := api.NewNetworkClient(n.url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func apiCode(err error) string {
	var ae *api.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// TestNetworkAuth: over real TLS on loopback, every request but the
// readiness probe authenticates (a token, or a client certificate the
// node's CA signed and its config names), acts only for its owners (403
// for another owner), and learns nothing of other owners: listings are
// filtered and their kernels are not found. The Unix socket keeps acting
// as the admin.
func TestNetworkAuth(t *testing.T) {
	cfg, ca := netConfig(t)
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	alice, acme, admin := n.client(t, aliceToken, ""), n.client(t, acmeToken, ""), n.client(t, adminToken, "")
	bob := n.client(t, "", "bob-gateway")

	run := func(c *api.Client, owner string) *pool.Result {
		t.Helper()
		res, err := c.Execute(ctx, pool.Request{Owner: owner, Code: "x = " + fmt.Sprintf("%q", owner) + "\nprint(x)"})
		if err != nil || res.Status != pool.StatusSuccess || res.Output != owner+"\n" {
			t.Fatalf("execute as %s: %+v, %v", owner, res, err)
		}
		return res
	}
	run(alice, "alice")
	run(acme, "acme/one")
	bobKernel := run(bob, "bob").Kernel.ID
	run(admin, "carol")

	refused := []struct {
		name  string
		c     *api.Client
		owner string
	}{
		{"alice as bob", alice, "bob"},
		{"alice as the default owner", alice, ""},
		{"acme outside its prefix", acme, "acme"},
		{"bob's certificate as alice", bob, "alice"},
	}
	for _, tc := range refused {
		_, err := tc.c.Execute(ctx, pool.Request{Owner: tc.owner, Code: "1"})
		if apiCode(err) != api.CodeForbidden || !errors.Is(err, api.ErrForbidden) {
			t.Errorf("%s: %v, want 403 forbidden", tc.name, err)
		}
	}
	for name, c := range map[string]*api.Client{
		"no credentials":       n.client(t, "", ""),
		"a wrong token":        n.client(t, "kp_nobody", ""),
		"an unknown client CN": n.client(t, "", "mallory"),
	} {
		if _, err := c.List(ctx); apiCode(err) != api.CodeUnauthorized {
			t.Errorf("%s: %v, want 401 unauthorized", name, err)
		}
		if st, err := c.Ready(ctx); err != nil || st != api.StateReady {
			t.Errorf("%s: the readiness probe needs no credentials: %q, %v", name, st, err)
		}
	}

	owners := func(c *api.Client) string {
		t.Helper()
		l, err := c.Listing(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var o []string
		for _, k := range l.Kernels {
			if k.Owner != "" { // spares have no owner
				o = append(o, k.Owner)
			}
		}
		return strings.Join(sortedCopy(o), ",")
	}
	if got := owners(alice); got != "alice" {
		t.Errorf("alice lists %q, want only alice", got)
	}
	if got := owners(acme); got != "acme/one" {
		t.Errorf("acme lists %q, want only acme/one", got)
	}
	if got := owners(admin); got != "acme/one,alice,bob,carol" {
		t.Errorf("the admin token lists %q", got)
	}
	if got := owners(n.local); got != "acme/one,alice,bob,carol" {
		t.Errorf("the Unix socket lists %q", got)
	}
	// Another owner's kernel is not found, exactly as a kernel that does not exist.
	_, ghost := alice.Variables(ctx, "k0000000000000000")
	_, hidden := alice.Variables(ctx, bobKernel)
	if apiCode(hidden) != api.CodeNotFound || hidden.Error() != strings.ReplaceAll(ghost.Error(), "k0000000000000000", bobKernel) {
		t.Errorf("alice reading bob's kernel: %v; a missing kernel: %v", hidden, ghost)
	}
	if err := alice.Kill(ctx, bobKernel); apiCode(err) != api.CodeNotFound {
		t.Errorf("alice killing bob's kernel: %v, want not_found", err)
	}
	if _, err := alice.ShutdownOwner(ctx, "bob"); apiCode(err) != api.CodeForbidden {
		t.Errorf("alice shutting bob down: %v, want forbidden", err)
	}
	if _, err := alice.DrainStatus(ctx); apiCode(err) != api.CodeForbidden {
		t.Errorf("alice reading the drain: %v, want forbidden", err)
	}
	if _, err := alice.Drain(ctx, nil); apiCode(err) != api.CodeForbidden {
		t.Errorf("alice draining the node: %v, want forbidden", err)
	}
	if v, err := bob.Variables(ctx, bobKernel); err != nil || len(v.Variables) != 1 {
		t.Errorf("bob reading his own kernel: %+v, %v", v, err)
	}
	if err := admin.Kill(ctx, bobKernel); err != nil {
		t.Errorf("the admin killing bob's kernel: %v", err)
	}
	if h, err := admin.Health(ctx); err != nil || h.State != api.StateReady || h.MaxKernels != cfg.MaxKernels || h.Kernels != 3 {
		t.Errorf("health over the network: %+v, %v", h, err)
	}
	// A scoped credential learns the node's state, not its figures (they span every owner).
	if h, err := alice.Health(ctx); err != nil || h.State != api.StateReady || h.Kernels != 0 || h.Stats.Cells != 0 || h.MaxKernels != 0 {
		t.Errorf("health for alice: %+v, %v", h, err)
	}
	// A certificate from another CA, sent anyway, fails the handshake.
	other := newTestCA(t, t.TempDir(), "other")
	certFile, keyFile := other.issue(t, "bob-gateway", false)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	tc := tlsClientConfig(t, ca)
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	c, _ := api.NewNetworkClient(n.url, api.NetworkOptions{TLSConfig: tc})
	defer c.CloseIdleConnections()
	if _, err := c.List(ctx); !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client certificate of another CA: %v, want a failed handshake", err)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestNetworkBounds: what a network client can make the node spend is
// bounded: connections over listen_max_conns are closed unanswered,
// headers over listen_max_header_bytes are 431, a connection that never
// completes its handshake is closed after listen_header_timeout, and a
// body over the API's cap is 413.
func TestNetworkBounds(t *testing.T) {
	cfg, ca := netConfig(t)
	cfg.Network.MaxConns = 2
	cfg.Network.MaxHeaderBytes = 4 << 10
	cfg.Network.HeaderTimeout = 500 * time.Millisecond
	n := startNetNode(t, cfg, ca)
	addr := strings.TrimPrefix(n.url, "https://")
	tc := tlsClientConfig(t, ca)

	// A silent TCP connection: no handshake; the node closes it.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("a silent connection: %v after %s, want closed by the node", err, time.Since(start))
	}

	// Two open connections take the cap; a third is closed unanswered.
	var held []*tls.Conn
	for range 2 {
		c, err := tls.Dial("tcp", addr, tc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// One request makes it an idle kept-alive connection, which
		// listen_idle_timeout (not the header timeout) bounds.
		if status := roundTrip(t, c, "GET /v1/ready HTTP/1.1\r\nHost: x\r\n\r\n"); status != http.StatusOK {
			t.Fatalf("ready on a held connection: %d", status)
		}
		held = append(held, c)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := raw.Read(make([]byte, 1)); n != 0 || (!errors.Is(err, io.EOF) && !isReset(err)) {
		t.Errorf("a third connection over the cap of 2: read %d bytes, %v; want closed", n, err)
	}
	_ = raw.Close()

	// On a held connection: headers over 4 KiB are 431.
	big := "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + adminToken + "\r\nX-Pad: " + strings.Repeat("a", 16<<10) + "\r\n\r\n"
	if status := roundTrip(t, held[0], big); status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers: status %d, want 431", status)
	}
	// A body over the cap (16 MiB) is 413 before it is read whole.
	body := strings.Repeat(" ", api.DefaultMaxBodyBytes+1)
	req := fmt.Sprintf("POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", adminToken, len(body), body)
	if status := roundTrip(t, held[1], req); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 16 MiB + 1 body: status %d, want 413", status)
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

func tlsClientConfig(t testing.TB, ca *testCA) *tls.Config {
	t.Helper()
	roots := x509Pool(t, ca)
	return &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
}

// roundTrip writes a raw request on c and returns the answer's status.
func roundTrip(t testing.TB, c net.Conn, raw string) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	go func() { _, _ = io.WriteString(c, raw) }() // the node may answer before reading it all
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestNetworkConfigRefused: a listener the config cannot make safe does
// not start, and each refusal says why.
func TestNetworkConfigRefused(t *testing.T) {
	tok := []daemon.Credential{{Name: "a", SHA256: api.TokenDigest("t"), Admin: true}}
	cases := []struct {
		name string
		set  func(*daemon.NetworkConfig)
		want string
	}{
		{"every interface without TLS", func(n *daemon.NetworkConfig) { n.Listen, n.Tokens = ":8443", tok }, "not a loopback address"},
		{"a LAN address without TLS", func(n *daemon.NetworkConfig) { n.Listen, n.Tokens = "10.1.2.3:8443", tok }, "needs tls_cert and tls_key"},
		{"no credential", func(n *daemon.NetworkConfig) { n.Listen = "127.0.0.1:8443" }, "at least one token or client_cert"},
		{"a key without its cert", func(n *daemon.NetworkConfig) { n.Listen, n.Tokens, n.TLSKey = "127.0.0.1:1", tok, "k" }, "tls_cert and tls_key go together"},
		{"client_cert without a CA", func(n *daemon.NetworkConfig) {
			n.Listen, n.TLSCert, n.TLSKey = "127.0.0.1:1", "c", "k"
			n.ClientCerts = []daemon.Credential{{Name: "x", Admin: true}}
		}, "need tls_client_ca"},
		{"a token that is no digest", func(n *daemon.NetworkConfig) {
			n.Listen, n.Tokens = "127.0.0.1:1", []daemon.Credential{{Name: "a", SHA256: "secret", Admin: true}}
		}, "not a SHA-256 digest"},
		{"admin and owners", func(n *daemon.NetworkConfig) {
			n.Listen, n.Tokens = "127.0.0.1:1", []daemon.Credential{{Name: "a", SHA256: api.TokenDigest("t"), Admin: true, Owners: []string{"x"}}}
		}, "not both and not neither"},
		{"an empty prefix", func(n *daemon.NetworkConfig) {
			n.Listen, n.Tokens = "127.0.0.1:1", []daemon.Credential{{Name: "a", SHA256: api.TokenDigest("t"), OwnerPrefixes: []string{""}}}
		}, "empty owner prefix"},
		{"two tokens, one digest", func(n *daemon.NetworkConfig) {
			n.Listen = "127.0.0.1:1"
			n.Tokens = append(append([]daemon.Credential{}, tok...), daemon.Credential{Name: "b", SHA256: api.TokenDigest("t"), Admin: true})
		}, "has the digest of token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := daemon.DefaultConfig()
			tc.set(&cfg.Network)
			err := cfg.Validate()
			if !errors.Is(err, daemon.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrConfig saying %q", err, tc.want)
			}
		})
	}
	// Loopback without TLS is allowed (with a credential).
	cfg := daemon.DefaultConfig()
	cfg.Network.Listen, cfg.Network.Tokens = "[::1]:8443", tok
	if err := cfg.Validate(); err != nil {
		t.Errorf("loopback without TLS: %v", err)
	}
	// Unreadable TLS material stops New, before anything serves.
	bad := testConfig(t)
	bad.Network.Listen, bad.Network.Tokens = "127.0.0.1:0", tok
	bad.Network.TLSCert, bad.Network.TLSKey = filepath.Join(t.TempDir(), "missing.pem"), filepath.Join(t.TempDir(), "missing-key.pem")
	if d, err := daemon.New(context.Background(), bad, daemon.WithLogger(hclog.NewNullLogger())); err == nil {
		_ = d.Shutdown(context.Background())
		t.Fatal("New started with a missing tls_cert")
	} else if !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("New with a missing tls_cert: %v, want the path named", err)
	}
}

// TestNetworkConfigFile: the HCL keys and blocks of the listener.
func TestNetworkConfigFile(t *testing.T) {
	src := `
listen = "127.0.0.1:8443"
drain_on_term = true
listen_max_conns = 32
listen_max_header_bytes = "16KiB"
listen_header_timeout = "3s"
token "gw" {
  sha256 = "` + strings.ToUpper(api.TokenDigest("x")) + `"
  owner_prefixes = ["acme/"]
}
token "ops" {
  sha256 = "` + api.TokenDigest("y") + `"
  admin = true
}
`
	cfg, err := daemon.ParseConfig([]byte(src), "net.hcl")
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Network
	if !cfg.DrainOnTerm || n.Listen != "127.0.0.1:8443" || n.MaxConns != 32 || n.MaxHeaderBytes != 16<<10 || n.HeaderTimeout != 3*time.Second ||
		len(n.Tokens) != 2 || n.Tokens[0].SHA256 != api.TokenDigest("x") || n.Tokens[0].OwnerPrefixes[0] != "acme/" || !n.Tokens[1].Admin {
		t.Errorf("parsed %+v", n)
	}
	if _, err := daemon.ParseConfig([]byte("client_cert \"x\" {\n  sha256 = \"ab\"\n  admin = true\n}\n"), "bad.hcl"); err == nil || !strings.Contains(err.Error(), "bad.hcl:2") {
		t.Errorf("a client_cert with a sha256: %v, want an error at bad.hcl:2", err)
	}
}

// TestNetworkToolCallScope: a streamed tool call can be answered only by
// the credential whose request runs the cell (or an admin): another
// token's answer is not found and the call stays pending.
func TestNetworkToolCallScope(t *testing.T) {
	cfg, ca := netConfig(t)
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	alice, acme := n.client(t, aliceToken, ""), n.client(t, acmeToken, "")
	h := pool.ToolHandlerFunc(func(ctx context.Context, call pool.ToolCall) (string, error) {
		err := acme.AnswerToolCall(ctx, call.ID, api.ToolAnswer{Result: ptr("from acme")})
		if apiCode(err) != api.CodeNotFound {
			t.Errorf("acme answering alice's tool call %s: %v, want not_found", call.ID, err)
		}
		return "from alice", nil
	})
	res, err := alice.ExecuteStream(ctx, pool.Request{Owner: "alice", Tools: []string{"ask"},
		Code: "import kernpool_tools as t\nprint(t.ask())"}, h)
	if err != nil || res.Output != "from alice\n" {
		t.Fatalf("alice's cell: %+v, %v", res, err)
	}
}

func ptr(s string) *string { return &s }

// TestNetworkReload: SIGHUP's Reload swaps the listener's tokens: a
// removed token is refused at once, an added one accepted, without a
// restart; a reload whose TLS files do not load is refused whole.
func TestNetworkReload(t *testing.T) {
	cfg, ca := netConfig(t)
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	alice := n.client(t, aliceToken, "")
	if _, err := alice.List(ctx); err != nil {
		t.Fatal(err)
	}
	next := *n.d.Config()
	next.Network.Tokens = []daemon.Credential{{Name: "alice2", SHA256: api.TokenDigest("kp_alice_two"), Owners: []string{"alice"}}}
	if err := n.d.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.List(ctx); apiCode(err) != api.CodeUnauthorized {
		t.Errorf("the removed token after Reload: %v, want unauthorized", err)
	}
	if _, err := n.client(t, "kp_alice_two", "").List(ctx); err != nil {
		t.Errorf("the added token after Reload: %v", err)
	}
	bad := next
	bad.Network.TLSCert = filepath.Join(t.TempDir(), "gone.pem")
	bad.Network.Tokens = cfg.Network.Tokens
	if err := n.d.Reload(&bad); err == nil {
		t.Fatal("Reload accepted a missing tls_cert")
	}
	if _, err := alice.List(ctx); apiCode(err) != api.CodeUnauthorized {
		t.Errorf("a refused Reload changed the tokens: %v", err)
	}
}
