package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
)

// sameProgress tells a stream's unchanged status from a changed one:
// any one field that a client follows differing is a change.
func TestSameProgress(t *testing.T) {
	base := DrainStatus{State: StateDraining, CellsRunning: 1, Saved: 2, Failed: 3, Remaining: 4}
	if !sameProgress(base, base) {
		t.Fatal("a status differs from itself")
	}
	for name, change := range map[string]func(*DrainStatus){
		"state":     func(s *DrainStatus) { s.State = StateDrained },
		"running":   func(s *DrainStatus) { s.CellsRunning++ },
		"saved":     func(s *DrainStatus) { s.Saved++ },
		"failed":    func(s *DrainStatus) { s.Failed++ },
		"remaining": func(s *DrainStatus) { s.Remaining++ },
	} {
		other := base
		change(&other)
		if sameProgress(base, other) || sameProgress(other, base) {
			t.Errorf("a change of %s is not progress", name)
		}
	}
}

// A drain begins once: not again while it runs nor after it ended; a
// plain shutdown (SetDraining) does not stop one from beginning.
func TestBeginDrainOnce(t *testing.T) {
	s := NewServer(emptyPool(t), ServerConfig{})
	s.SetDraining()
	if got := s.State(); got != StateNotReady {
		t.Fatalf("after SetDraining: %q", got)
	}
	if !s.BeginDrain() {
		t.Fatal("BeginDrain after SetDraining: false, want the drain begun")
	}
	if s.BeginDrain() {
		t.Error("BeginDrain while draining: true")
	}
	if st := s.EndDrain(); st.State != StateDrained {
		t.Fatalf("EndDrain: %+v", st)
	}
	if s.BeginDrain() || s.State() != StateDrained {
		t.Errorf("BeginDrain after the drain: began again (state %q)", s.State())
	}
}

// POST /v1/drain: 501 without a daemon that drains; else OnDrain once
// and 202 with the status, or with ?wait=true a stream of one line per
// change ending with "drained".
func TestDrainEndpoint(t *testing.T) {
	s := NewServer(emptyPool(t), ServerConfig{})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/drain", nil))
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), CodeNotSupported) {
		t.Fatalf("drain without OnDrain: %d %s", rec.Code, rec.Body)
	}
	if s.State() != StateReady {
		t.Fatalf("a refused drain changed the state to %q", s.State())
	}

	var calls sync.WaitGroup
	n := 0
	calls.Add(1)
	s = NewServer(emptyPool(t), ServerConfig{OnDrain: func() { n++; calls.Done() }})
	srv := httptest.NewServer(s)
	defer srv.Close()
	hc := srv.Client() // its idle connections close with srv
	resp, err := hc.Post(srv.URL+"/v1/drain", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st DrainStatus
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted || st.State != StateDraining {
		t.Fatalf("drain: %d %+v %v; want 202 draining", resp.StatusCode, st, err)
	}
	calls.Wait()

	resp, err = hc.Post(srv.URL+"/v1/drain?wait=true", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("waiting drain: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	var states []NodeState
	for sc.Scan() {
		var st DrainStatus
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			t.Fatalf("stream line %q: %v", sc.Text(), err)
		}
		states = append(states, st.State)
		if len(states) == 1 {
			s.EndDrain() // the change the stream waits for
		}
	}
	if want := []NodeState{StateDraining, StateDrained}; len(states) != 2 || states[0] != want[0] || states[1] != want[1] {
		t.Errorf("stream %q, want %q", states, want)
	}
	if n != 1 {
		t.Errorf("OnDrain called %d times, want 1", n)
	}
}

// A routed cell (it carries the owner's generation) refused by a
// draining node marks its owner's record saved (the pool holds nothing
// unsaved of it), the mark's failure logged (a warning, not a refusal); the cell is refused
// as draining either way. A cell not routed marks nothing.
func TestRoutedCellRefusedWhileDraining(t *testing.T) {
	for _, tc := range []struct {
		name      string
		routed    bool
		savedHook bool
		savedErr  error
		marked    []string
	}{
		{name: "marked saved", routed: true, savedHook: true, marked: []string{"alice"}},
		{name: "mark fails", routed: true, savedHook: true, savedErr: errors.New("store down"), marked: []string{"alice"}},
		{name: "no saved hook", routed: true},
		{name: "not routed", savedHook: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var marked, saving []string
			var logged bytes.Buffer
			cfg := ServerConfig{Logger: hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Warn}), OwnerSaving: func(_ context.Context, owner string) error {
				saving = append(saving, owner)
				return nil
			}}
			if tc.savedHook {
				cfg.OwnerSaved = func(_ context.Context, owner string) error {
					marked = append(marked, owner)
					return tc.savedErr
				}
			}
			s := NewServer(emptyPool(t), cfg)
			s.BeginDrain()
			req := httptest.NewRequest(http.MethodPost, "/v1/execute", strings.NewReader(`{"owner":"alice","code":"1"}`))
			if tc.routed {
				req.Header.Set(HeaderOwnerGeneration, "3")
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"code":"`+CodeDraining+`"`) {
				t.Fatalf("cell: %d %s; want 503 draining", rec.Code, rec.Body)
			}
			if strings.Join(marked, ",") != strings.Join(tc.marked, ",") || len(saving) != 0 {
				t.Errorf("marked saved %q, saving %q; want saved %q", marked, saving, tc.marked)
			}
			// The failed mark is the operator's to see; a good one is not.
			if got := strings.Contains(logged.String(), "not marked saved"); got != (tc.savedErr != nil) {
				t.Errorf("failed mark logged %v, want %v (log %q)", got, tc.savedErr != nil, logged.String())
			}
		})
	}
}

// A routed cell refused while the pool still holds its owner's unsaved
// state marks the owner's record saving (the router waits for the
// save) and is refused as draining; when that mark fails the cell is
// refused 503 no_node instead, without leave to move the owner.
func TestRoutedCellOfUnsavedOwner(t *testing.T) {
	for _, tc := range []struct {
		name      string
		savingErr error
		status    int
		code      string
	}{
		{name: "marked saving", status: http.StatusServiceUnavailable, code: CodeDraining},
		{name: "mark fails", savingErr: errors.New("store down"), status: http.StatusServiceUnavailable, code: CodeNoNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.RequirePython(t)
			p, err := pool.New(pool.Config{StateDir: t.TempDir(), DefaultInterpreter: testenv.Python,
				Policies: map[string]pool.CellPolicy{"default": {Persist: true}}})
			if err != nil {
				t.Fatalf("pool.New: %v", err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			if _, err := p.Execute(context.Background(), pool.Request{Owner: "alice", Code: "x = 1"}); err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if !p.OwnerUnsaved("alice") {
				t.Fatal("alice's persist kernel holds no unsaved state after a cell")
			}
			var saving, saved []string
			s := NewServer(p, ServerConfig{
				OwnerSaving: func(_ context.Context, owner string) error { saving = append(saving, owner); return tc.savingErr },
				OwnerSaved:  func(_ context.Context, owner string) error { saved = append(saved, owner); return nil },
			})
			s.BeginDrain()
			req := httptest.NewRequest(http.MethodPost, "/v1/execute", strings.NewReader(`{"owner":"alice","code":"1"}`))
			req.Header.Set(HeaderOwnerGeneration, "3")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), `"code":"`+tc.code+`"`) {
				t.Fatalf("cell: %d %s; want %d %s", rec.Code, rec.Body, tc.status, tc.code)
			}
			if len(saving) != 1 || saving[0] != "alice" || len(saved) != 0 {
				t.Errorf("marked saving %q, saved %q; want saving [alice]", saving, saved)
			}
		})
	}
}

// randomID names a tool call: "t" and 16 hex digits, a new one each time.
func TestRandomID(t *testing.T) {
	a, b := randomID(), randomID()
	if len(a) != 17 || a[0] != 't' || strings.Trim(a[1:], "0123456789abcdef") != "" || a == b {
		t.Errorf("randomID: %q then %q", a, b)
	}
}
