package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSettingsEndpoint: GET /v1/settings answers what ServerConfig.Settings
// returns now (the daemon's config after its last reload), and 404 for an
// embedder that reports none.
func TestSettingsEndpoint(t *testing.T) {
	get := func(s *Server) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/settings", nil))
		return w
	}
	if w := get(NewServer(nil, ServerConfig{})); w.Code != http.StatusNotFound {
		t.Fatalf("without Settings: %d %s, want 404", w.Code, w.Body)
	}
	limit := 3
	s := NewServer(nil, ServerConfig{Settings: func() *Settings {
		return &Settings{MaxKernels: limit, IdleTimeout: Duration(17 * time.Minute), Profiles: map[string]ProfileSettings{}}
	}})
	for _, want := range []int{3, 9} {
		limit = want
		w := get(s)
		var got Settings
		if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || got.MaxKernels != want || got.IdleTimeout != Duration(17*time.Minute) {
			t.Fatalf("GET /v1/settings: %d %s (%v), want max_kernels %d", w.Code, w.Body, err, want)
		}
	}
}
