package daemon_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// TestNetworkReloadCertificates: a reload applies the client_cert
// blocks (a certificate's scope moves from bob to carol at once), a
// rotated tls_cert (new handshakes get the new certificate) and a
// rotated tls_client_ca (a client certificate of the old CA fails the
// handshake, one of the new CA authenticates) without a restart.
func TestNetworkReloadCertificates(t *testing.T) {
	cfg, ca := netConfig(t)
	n := startNetNode(t, cfg, ca)
	ctx := context.Background()
	bob := n.client(t, "", "bob-gateway")
	if _, err := bob.Execute(ctx, pool.Request{Owner: "carol", Code: "1"}); apiCode(err) != api.CodeForbidden {
		t.Fatalf("bob-gateway for carol before the reload: %v, want forbidden", err)
	}
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", strings.TrimPrefix(n.url, "https://"), &tls.Config{RootCAs: x509Pool(t, ca), MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := served(); cn != "node1" {
		t.Fatalf("the listener serves %q, want node1", cn)
	}

	next := cloneConfig(n.d.Config())
	next.Network.ClientCerts = []daemon.Credential{{Name: "bob-gateway", Owners: []string{"carol"}}}
	next.Network.TLSCert, next.Network.TLSKey = ca.issue(t, "node2", true)
	if err := n.d.Reload(next); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "node2" {
		t.Errorf("after a reload with a new tls_cert the listener serves %q, want node2", cn)
	}
	bob.CloseIdleConnections() // a kept-alive connection keeps its handshake
	if res, err := bob.Execute(ctx, pool.Request{Owner: "carol", Code: "1"}); err != nil || res.Status != pool.StatusSuccess {
		t.Errorf("bob-gateway for carol after the reload: %+v, %v", res, err)
	}
	if _, err := bob.Execute(ctx, pool.Request{Owner: "bob", Code: "1"}); apiCode(err) != api.CodeForbidden {
		t.Errorf("bob-gateway for bob after the reload: %v, want forbidden", err)
	}

	ca2 := newTestCA(t, t.TempDir(), "kp2")
	next = cloneConfig(n.d.Config())
	next.Network.TLSClientCA = ca2.file
	if err := n.d.Reload(next); err != nil {
		t.Fatal(err)
	}
	bob.CloseIdleConnections()
	if _, err := bob.List(ctx); err == nil {
		t.Error("a client certificate of the replaced CA still authenticates")
	}
	cert, key := ca2.issue(t, "bob-gateway", false)
	bob2, err := api.NewNetworkClient(n.url, api.NetworkOptions{CAFile: ca.file, CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	defer bob2.CloseIdleConnections()
	if res, err := bob2.Execute(ctx, pool.Request{Owner: "carol", Code: "1"}); err != nil || res.Status != pool.StatusSuccess {
		t.Errorf("a certificate of the new tls_client_ca: %+v, %v", res, err)
	}
}
