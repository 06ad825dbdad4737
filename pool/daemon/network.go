package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/pool/api"
)

// netAuth is what the network listener authenticates with: the
// credentials and the TLS material, each swapped whole by a reload.
type netAuth struct {
	creds atomic.Pointer[api.Credentials]
	tls   atomic.Pointer[tls.Config] // nil: plain HTTP on loopback
}

// loadNetAuth reads the listener's credentials and TLS files.
func loadNetAuth(n *NetworkConfig) (*netAuth, error) {
	a := &netAuth{}
	if err := a.load(n); err != nil {
		return nil, err
	}
	return a, nil
}

// load reads n's credentials and TLS files and swaps them in; on error
// nothing changes.
func (a *netAuth) load(n *NetworkConfig) error {
	creds, err := n.credentials()
	if err != nil {
		return err
	}
	var tc *tls.Config
	if n.TLSCert != "" {
		if tc, err = serverTLS(n); err != nil {
			return err
		}
	}
	a.creds.Store(creds)
	a.tls.Store(tc)
	return nil
}

// serverTLS builds the listener's TLS config: TLS 1.2 or later, HTTP/1.1
// only (one request stream per connection, so the connection cap bounds
// the requests), and client certificates verified against tls_client_ca
// when one is set (optional in the handshake: a token may authenticate
// instead; a certificate sent must verify).
func serverTLS(n *NetworkConfig) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(n.TLSCert, n.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("%w: tls_cert %s, tls_key %s: %v", ErrConfig, n.TLSCert, n.TLSKey, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{cert}}
	if n.TLSClientCA != "" {
		pool, err := loadCertPool("tls_client_ca", n.TLSClientCA)
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// loadCertPool reads the PEM certificates of the file config key names.
func loadCertPool(key, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s %s holds no PEM certificate", ErrConfig, key, path)
	}
	return pool, nil
}

// listenerTLS is the config tls.NewListener gets: each handshake takes
// the current material, so a reload rotates certificates without a
// restart.
func (a *netAuth) listenerTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return a.tls.Load(), nil }}
}

// ListenNetwork opens the configured network listener (cfg.Network.Listen):
// at most listen_max_conns connections at once (more are closed at
// once), TLS when tls_cert is set. New refused a configuration that would
// serve plain HTTP beyond loopback.
func (d *Daemon) ListenNetwork() (net.Listener, error) {
	return listenNetwork(&d.cfg.Network, d.net)
}

// listenNetwork opens n's listener with a's TLS material (a node's or a
// router's: the same code serves both).
func listenNetwork(n *NetworkConfig, a *netAuth) (net.Listener, error) {
	if n.Listen == "" || a == nil {
		return nil, errors.New("listen: no network address configured (listen)")
	}
	ln, err := net.Listen("tcp", n.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", n.Listen, err)
	}
	ln = api.LimitConnsClose(ln, n.MaxConns)
	if a.tls.Load() != nil {
		ln = tls.NewListener(ln, a.listenerTLS())
	}
	return ln, nil
}

// ServeNetwork serves the API on ln (from ListenNetwork) until Shutdown:
// every request but GET /v1/ready authenticates and acts only for its
// credential's owners. The bounds: listen_header_timeout for the TLS
// handshake and the headers, listen_max_header_bytes, the API's body cap
// and body timeout, listen_idle_timeout between requests.
func (d *Daemon) ServeNetwork(ln net.Listener) error {
	d.mu.Lock()
	if d.shutdown || d.netSrv != nil || d.net == nil {
		d.mu.Unlock()
		_ = ln.Close()
		return errors.New("serve network: the daemon is shut down, already serving, or has no listen address")
	}
	d.netSrv = networkServer(&d.cfg.Network, d.handler.NetworkHandler(d.net.creds.Load), d.log)
	srv := d.netSrv
	d.mu.Unlock()
	d.startHeartbeat()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// networkServer is the http.Server of a network listener with n's bounds.
func networkServer(n *NetworkConfig, h http.Handler, log hclog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: n.HeaderTimeout,
		IdleTimeout:       n.IdleTimeout,
		MaxHeaderBytes:    n.MaxHeaderBytes,
		// No HTTP/2: its streams would multiply the requests one
		// connection carries past what listen_max_conns bounds.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     log.Named("http-net").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}

// reloadNetwork rereads the listener's credentials and TLS files
// (token and client_cert blocks, and the files tls_cert, tls_key and
// tls_client_ca name). The address, the bounds, and turning TLS or
// client certificates on or off need a restart: diffConfig lists them.
func (r *reloader) reloadNetwork(next *Config) error {
	if r.net == nil {
		return nil
	}
	n := next.Network
	if !credentialsReload(r.cur.Network, n) {
		return nil // a restart applies it; the running material stays
	}
	if err := r.net.load(&n); err != nil {
		return fmt.Errorf("reload the network listener's credentials: %w", err)
	}
	return nil
}

// withCredentials is cur with next's reloadable parts (credentials and
// TLS file paths) when a listener runs to reload them.
func withCredentials(cur, next NetworkConfig, listening bool) NetworkConfig {
	if !listening || !credentialsReload(cur, next) {
		return cur
	}
	cur.Tokens, cur.ClientCerts = next.Tokens, next.ClientCerts
	cur.TLSCert, cur.TLSKey, cur.TLSClientCA = next.TLSCert, next.TLSKey, next.TLSClientCA
	return cur
}

// credentialsReload says whether a running listener takes next's
// credentials and TLS files on a reload: not when TLS or client
// certificates turn on or off (a restart does that).
func credentialsReload(cur, next NetworkConfig) bool {
	return (cur.TLSCert == "") == (next.TLSCert == "") && (cur.TLSClientCA == "") == (next.TLSClientCA == "")
}

// credentialChanges names what changed among the reloadable credentials.
func credentialChanges(old, next NetworkConfig) []string {
	var out []string
	names := func(cs []Credential) string {
		var s []string
		for _, c := range cs {
			s = append(s, c.Name)
		}
		return strings.Join(s, ",")
	}
	if !reflect.DeepEqual(old.Tokens, next.Tokens) {
		out = append(out, fmt.Sprintf("tokens: [%s] -> [%s]", names(old.Tokens), names(next.Tokens)))
	}
	if !reflect.DeepEqual(old.ClientCerts, next.ClientCerts) {
		out = append(out, fmt.Sprintf("client_cert: [%s] -> [%s]", names(old.ClientCerts), names(next.ClientCerts)))
	}
	if old.TLSCert != next.TLSCert || old.TLSKey != next.TLSKey || old.TLSClientCA != next.TLSClientCA {
		out = append(out, "tls_cert, tls_key, tls_client_ca paths")
	}
	return out
}
