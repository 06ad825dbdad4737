//go:build unix

package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool/api"
)

// deadlineRecorder is a ResponseWriter that records the read deadlines a
// handler sets through http.ResponseController.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// A request body is read under the body deadline, and a refused one
// (here: an unknown field) keeps it: net/http's read of the body's rest
// after the answer stays bounded (TestRefusedBodyCannotHoldTheConnection).
func TestRefusedBodyKeepsItsDeadline(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	srv := api.NewServer(d.pool, api.ServerConfig{BodyReadTimeout: time.Hour})
	for _, path := range []string{"/v1/execute", "/v1/tool-calls/t1", "/v1/sessions"} {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		before := time.Now()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"bogus":1}`)))
		n := len(rec.deadlines)
		if rec.Code != http.StatusBadRequest || n != 1 || rec.deadlines[0].Before(before.Add(time.Hour)) {
			t.Errorf("POST %s with an unknown field: %d, read deadlines %v; want 400 and one deadline, an hour ahead", path, rec.Code, rec.deadlines)
		}
	}
}
