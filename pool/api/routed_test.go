//go:build unix

package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// ownerMarks records a fleet's marks of owners' records (ServerConfig's
// OwnerSaving and OwnerSaved); OwnerSaving fails for owner "broken".
type ownerMarks struct {
	mu            sync.Mutex
	saving, saved []string
}

func (m *ownerMarks) config(c *api.ServerConfig) {
	c.OwnerSaving = func(_ context.Context, owner string) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.saving = append(m.saving, owner)
		if owner == "broken" {
			return errors.New("registry down")
		}
		return nil
	}
	c.OwnerSaved = func(_ context.Context, owner string) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.saved = append(m.saved, owner)
		return nil
	}
}

// take returns the marks made since the last take and forgets them.
func (m *ownerMarks) take() (saving, saved []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	saving, saved, m.saving, m.saved = m.saving, m.saved, nil, nil
	return saving, saved
}

// executeAs sends POST /v1/execute through h in process, routed (with
// an owner generation) when gen is set; status, error code, Retry-After.
func executeAs(t *testing.T, h http.Handler, body, gen string) (int, string, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/execute", strings.NewReader(body))
	if gen != "" {
		req.Header.Set(api.HeaderOwnerGeneration, gen)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var eb api.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &eb)
	return rec.Code, eb.Code, rec.Header().Get("Retry-After")
}

// A draining node refuses a routed cell after marking its owner's
// record: saving while the pool holds unsaved state of the owner (503
// draining; 503 no_node, to retry, when the mark fails), else saved. A
// session's cell, a cell sent straight to the node, or a node outside a
// fleet marks nothing; a malformed body is 400.
func TestRoutedCellRefusedWhileDraining(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) {
		c.Policies = map[string]pool.CellPolicy{"default": {Persist: true, InterruptGrace: testenv.Patience}}
		c.Checkpoints.Idle = -1 // the state stays unsaved until the close
	}})
	d.exec(t, "unsaved", "x = 1")
	d.exec(t, "broken", "x = 1")
	var marks ownerMarks
	fleet := api.ServerConfig{}
	marks.config(&fleet)
	inFleet, alone := api.NewServer(d.pool, fleet), api.NewServer(d.pool, api.ServerConfig{})
	inFleet.BeginDrain()
	alone.BeginDrain()
	for _, tc := range []struct {
		name, body, gen string
		srv             *api.Server
		status          int
		code            string
		saving, saved   []string
	}{
		{"clean owner", `{"owner":"clean","code":"1"}`, "1", inFleet, 503, api.CodeDraining, nil, []string{"clean"}},
		{"unsaved owner", `{"owner":"unsaved","code":"1"}`, "1", inFleet, 503, api.CodeDraining, []string{"unsaved"}, nil},
		{"mark fails", `{"owner":"broken","code":"1"}`, "1", inFleet, 503, api.CodeNoNode, []string{"broken"}, nil},
		{"session", `{"session":"s1","code":"1"}`, "1", inFleet, 503, api.CodeDraining, nil, nil},
		{"malformed", `{"owner":`, "1", inFleet, 400, api.CodeBadRequest, nil, nil},
		{"not routed", `{"owner":"unsaved","code":"1"}`, "", inFleet, 503, api.CodeDraining, nil, nil},
		{"outside a fleet", `{"owner":"unsaved","code":"1"}`, "1", alone, 503, api.CodeDraining, nil, nil},
	} {
		status, code, retry := executeAs(t, tc.srv, tc.body, tc.gen)
		saving, saved := marks.take()
		if status != tc.status || code != tc.code || !slices.Equal(saving, tc.saving) || !slices.Equal(saved, tc.saved) {
			t.Errorf("%s: %d %q, marked saving %q saved %q; want %d %q, saving %q saved %q",
				tc.name, status, code, saving, saved, tc.status, tc.code, tc.saving, tc.saved)
		}
		if wantRetry := status == 503; (retry != "") != wantRetry {
			t.Errorf("%s: Retry-After %q", tc.name, retry)
		}
	}
}

// A routed cell that passed the node's drain check but found the pool
// closed by a drain that began meanwhile (here: from the fleet's
// placement check, on the cell's way to the pool) marks its owner's
// record as a refused one does and is answered 503 draining.
func TestRoutedCellClosedByDrain(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	var marks ownerMarks
	cfg := api.ServerConfig{}
	marks.config(&cfg)
	var srv *api.Server
	var drained sync.Once
	cfg.Placement = func(ctx context.Context, owner string) (uint64, bool, error) {
		drained.Do(func() {
			srv.BeginDrain()
			if err := d.pool.Close(ctx); err != nil {
				t.Error(err)
			}
		})
		return 1, true, nil
	}
	srv = api.NewServer(d.pool, cfg)
	status, code, _ := executeAs(t, srv, `{"owner":"o","code":"1"}`, "1")
	saving, saved := marks.take()
	if status != http.StatusServiceUnavailable || code != api.CodeDraining || len(saving) != 0 || !slices.Equal(saved, []string{"o"}) {
		t.Fatalf("a routed cell closed by a drain: %d %q, marked saving %q saved %q; want 503 draining, saved [o]", status, code, saving, saved)
	}
}
