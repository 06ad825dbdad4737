// Package s3test starts a real S3 protocol server for tests:
// github.com/johannesboyne/gofakes3 over an in-memory backend, served on
// a loopback port, so the S3 client under test speaks real HTTP to it.
package s3test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is a running fake S3 server.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:port.
	URL     string
	Backend *s3mem.Backend
	// Transport trusts a StartTLS server's certificate (nil for Start).
	Transport http.RoundTripper
}

// Start serves a fresh in-memory S3 with the given buckets over plain
// http until the test ends.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	be := newBackend(t, buckets)
	srv := httptest.NewServer(gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, Backend: be}
}

// StartTLS is Start over https (a test certificate: Transport trusts it),
// as a production store is reached.
func StartTLS(t testing.TB, buckets ...string) *Server {
	t.Helper()
	be := newBackend(t, buckets)
	srv := httptest.NewTLSServer(gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, Backend: be, Transport: srv.Client().Transport}
}

func newBackend(t testing.TB, buckets []string) *s3mem.Backend {
	be := s3mem.New()
	for _, b := range buckets {
		if err := be.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	return be
}

// Env is an environment with the endpoint and a test key, as the
// daemon reads it (AWS_* variables).
func (s *Server) Env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL":      s.URL,
		"AWS_ACCESS_KEY_ID":     "kernpool-test",
		"AWS_SECRET_ACCESS_KEY": "kernpool-test-secret",
		"AWS_REGION":            "us-east-1",
	}
}
