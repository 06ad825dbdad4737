//go:build unix

package api_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool/api"
)

// NewNetworkClient takes only https://host[:port] and loopback http, so
// a token never crosses a network in clear; the rest is refused at once.
func TestNetworkClientURLs(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://node.example:8443", true},
		{"https://node.example:8443/", true},
		{"http://127.0.0.1:8080", true},
		{"http://localhost:8080", true},
		{"http://[::1]:8080", true},
		{"http://node.example:8080", false},
		{"http://10.0.0.1:8080", false},
		{"https://node.example:8443/v1", false},
		{"ftp://node.example:21", false},
		{"https://", false},
		{"https://node.example:8443/%zz", false}, // not a URL
		{"node.example:8443", false},
	} {
		c, err := api.NewNetworkClient(tc.url, api.NetworkOptions{})
		if (err == nil) != tc.ok || (c != nil) != tc.ok {
			t.Errorf("NewNetworkClient(%q): client %v, error %v; want accepted %v", tc.url, c != nil, err, tc.ok)
		}
	}
}

// writePEM writes one PEM block to a new file in dir.
func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clientCert makes a self-signed client certificate named cn and writes
// it and its key to dir; the certificate is returned for the server's
// trust.
func clientCert(t *testing.T, dir, cn string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, cn+".crt", "CERTIFICATE", der), writePEM(t, dir, cn+".key", "EC PRIVATE KEY", kder), cert
}

// seen is what a TLS test node saw of its client's request.
type seen struct {
	proto, peer, auth string
}

// tlsNode is an https node answering /v1/ready "ready" that trusts
// clientCA for client certificates (optional ones) and reports what it
// saw of each request on the returned channel.
func tlsNode(t *testing.T, clientCA *x509.Certificate) (*httptest.Server, <-chan seen) {
	t.Helper()
	got := make(chan seen, 8)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{proto: r.TLS.NegotiatedProtocol, auth: r.Header.Get("Authorization")}
		if len(r.TLS.PeerCertificates) > 0 {
			s.peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		got <- s
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"state":"ready"}`))
	}))
	pool := x509.NewCertPool()
	pool.AddCert(clientCA)
	srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, got
}

// The https client verifies the node by the CA file (the system's roots
// otherwise), presents the client certificate when given both its files,
// sends the token, and speaks HTTP/1.1 by ALPN; bad trust or certificate
// files are refused when the client is made.
func TestNetworkClientTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, cert := clientCert(t, dir, "alice")
	srv, got := tlsNode(t, cert)
	caFile := writePEM(t, dir, "node-ca.pem", "CERTIFICATE", srv.Certificate().Raw)
	noPEM := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(noPEM, []byte("no certificate here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		opts api.NetworkOptions
		// newErr: the client is refused; connErr: its request fails.
		newErr, connErr bool
		peer            string
	}{
		{name: "CA file", opts: api.NetworkOptions{CAFile: caFile, Token: "tok"}},
		{name: "client certificate", opts: api.NetworkOptions{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, peer: "alice"},
		{name: "system roots", opts: api.NetworkOptions{}, connErr: true},
		{name: "CA file missing", opts: api.NetworkOptions{CAFile: missing}, newErr: true},
		{name: "CA file without PEM", opts: api.NetworkOptions{CAFile: noPEM}, newErr: true},
		{name: "cert without key", opts: api.NetworkOptions{CAFile: caFile, CertFile: certFile}, newErr: true},
		{name: "key without cert", opts: api.NetworkOptions{CAFile: caFile, KeyFile: keyFile}, newErr: true},
		{name: "cert files unreadable", opts: api.NetworkOptions{CAFile: caFile, CertFile: missing, KeyFile: keyFile}, newErr: true},
		{name: "TLSConfig wins over files", opts: api.NetworkOptions{CAFile: missing, TLSConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := api.NewNetworkClient(srv.URL, tc.opts)
			if tc.newErr {
				if err == nil {
					t.Fatalf("NewNetworkClient: nil error, want a refusal")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewNetworkClient: %v", err)
			}
			defer c.CloseIdleConnections()
			state, err := c.Ready(testCtx(t))
			if tc.connErr {
				if err == nil {
					t.Fatalf("Ready: %q, want a certificate verification error", state)
				}
				return
			}
			if err != nil || state != api.StateReady {
				t.Fatalf("Ready: %q, %v; want ready", state, err)
			}
			s := recv(t, "the node to see the request", got)
			want := seen{proto: "http/1.1", peer: tc.peer}
			if tc.opts.Token != "" {
				want.auth = "Bearer " + tc.opts.Token
			}
			if s != want {
				t.Errorf("node saw %+v, want %+v", s, want)
			}
		})
	}
}

// The caller's TLSConfig is cloned, not changed (it may serve others),
// and a plain http client on loopback needs no TLS files at all.
func TestNetworkClientLeavesTLSConfig(t *testing.T) {
	tc := &tls.Config{MinVersion: tls.VersionTLS13}
	if _, err := api.NewNetworkClient("https://node.example:8443", api.NetworkOptions{TLSConfig: tc}); err != nil {
		t.Fatal(err)
	}
	if tc.NextProtos != nil {
		t.Errorf("the caller's TLSConfig got NextProtos %q", tc.NextProtos)
	}
	if _, err := api.NewNetworkClient("http://127.0.0.1:1", api.NetworkOptions{CAFile: "/nonexistent/ca.pem"}); err != nil {
		t.Errorf("plain loopback http read the CA file: %v", err)
	}
}

// apiErr unwraps err's *api.APIError, failing the test without one.
func apiErr(t *testing.T, err error) *api.APIError {
	t.Helper()
	var ae *api.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is no *api.APIError", err)
	}
	return ae
}

// isProtocol reports whether err is api.ErrProtocol's.
func isProtocol(err error) bool { return errors.Is(err, api.ErrProtocol) }
