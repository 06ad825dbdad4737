package pool

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Each limits member at zero (no limit) is taken, and one below it is
// refused naming the field: the request body decides the sandbox's caps.
func TestLimitsZeroTakenNegativeRefused(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Limits
		err  string // "" when taken
	}{
		{`{"memory_max":0}`, Limits{}, ""},
		{`{"pids_max":0}`, Limits{}, ""},
		{`{"cpu_max":0}`, Limits{}, ""},
		{`{"memory_max":1,"pids_max":1,"cpu_max":0.5}`, Limits{MemoryMax: 1, PidsMax: 1, CPUMax: 0.5}, ""},
		{`{"memory_max":-1}`, Limits{}, `field "limits.memory_max" must not be negative`},
		{`{"pids_max":-1}`, Limits{}, `field "limits.pids_max" must not be negative`},
		{`{"cpu_max":-0.5}`, Limits{}, `field "limits.cpu_max" must not be negative`},
	} {
		var l Limits
		err := l.UnmarshalJSON([]byte(tc.body))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.body, err)
		case tc.err == "" && l != tc.want:
			t.Errorf("%s: read %+v, want %+v", tc.body, l, tc.want)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want ErrBadRequest saying %q", tc.body, err, tc.err)
		}
	}
}

// A limit equal to the ceiling is taken, one unit past it is refused, and
// the refusal prints both figures as the operator wrote them (a fractional
// cpu ceiling is not rounded).
func TestCeilingAtTheLimitAndOnePast(t *testing.T) {
	ceiling := Limits{MemoryMax: 64 << 20, PidsMax: 100, CPUMax: 1.5}
	for _, tc := range []struct {
		name string
		l    Limits
		err  string // "" when taken
	}{
		{"all at the ceiling", Limits{MemoryMax: 64 << 20, PidsMax: 100, CPUMax: 1.5}, ""},
		{"none set", Limits{}, ""},
		{"memory one byte past", Limits{MemoryMax: 64<<20 + 1}, "limits.memory_max 67108865B is over the ceiling of 64MiB"},
		{"pids one past", Limits{PidsMax: 101}, "limits.pids_max 101 is over the ceiling of 100"},
		{"cpu past", Limits{CPUMax: 1.75}, "limits.cpu_max 1.75 is over the ceiling of 1.5"},
	} {
		err := checkCeiling(tc.l, ceiling)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want ErrBadRequest saying %q", tc.name, err, tc.err)
		}
	}
	// A zero ceiling bounds nothing.
	if err := checkCeiling(Limits{MemoryMax: 1 << 40, PidsMax: 1 << 20, CPUMax: 64}, Limits{}); err != nil {
		t.Errorf("no ceiling: %v", err)
	}
}

// A request body's memory_max may be a size string as the config file
// writes it; the string is JSON-decoded (escapes included) before it is
// read as a size.
func TestLimitsMemoryAsSizeString(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
	}{
		{`{"limits":{"memory_max":"64MiB"}}`, 64 << 20},
		{`{"limits":{"memory_max":"1GB"}}`, 1000000000},
		{`{"limits":{"memory_max":"64\u004diB"}}`, 64 << 20},
		{`{"limits":{"memory_max": 4096 }}`, 4096},
	} {
		var req Request
		if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if req.Limits != (Limits{MemoryMax: tc.want}) {
			t.Errorf("%s: limits %+v, want memory_max %d", tc.body, req.Limits, tc.want)
		}
	}
}

// A refused limit's value is quoted in the error up to 40 bytes; a longer
// one is cut there and marked, so a huge body does not fill the error.
func TestLimitsErrorQuotesValueUpTo40Bytes(t *testing.T) {
	forty := `"` + strings.Repeat("x", 38) + `"`
	for _, tc := range []struct {
		name, value, got string
	}{
		{"40 bytes", forty, "got " + forty},
		{"41 bytes", `"` + strings.Repeat("y", 39) + `"`, "got \"" + strings.Repeat("y", 39) + "..."},
	} {
		var l Limits
		err := l.UnmarshalJSON([]byte(`{"pids_max":` + tc.value + `}`))
		if err == nil || !errors.Is(err, ErrBadRequest) || !strings.HasSuffix(err.Error(), tc.got) {
			t.Errorf("%s: error %v, want ErrBadRequest ending %q", tc.name, err, tc.got)
		}
	}
}

// A live kernel keeps the limits and passthrough names it started with: a
// later request naming none, or the same, runs on it; one naming other
// limits or other names is refused with ErrConflict and leaves its state.
func TestLiveKernelSettingsConflict(t *testing.T) {
	p := newTestPool(t)
	lim := Limits{PidsMax: 64}
	first := run(t, p, Request{Owner: "a", Code: "x = 1", Limits: lim, Passthrough: []string{"KP_PASS_A"}})
	wantStatus(t, first, StatusSuccess)
	for _, tc := range []struct {
		name     string
		req      Request
		conflict bool
	}{
		{"names none", Request{}, false},
		{"the same", Request{Limits: lim, Passthrough: []string{"KP_PASS_A"}}, false},
		{"other limits", Request{Limits: Limits{PidsMax: 65}}, true},
		{"other passthrough", Request{Passthrough: []string{"KP_PASS_B"}}, true},
	} {
		tc.req.Owner, tc.req.Code = "a", "x"
		res, err := p.Execute(t.Context(), tc.req)
		switch {
		case tc.conflict && !errors.Is(err, ErrConflict):
			t.Errorf("%s: %+v, %v; want ErrConflict", tc.name, res, err)
		case !tc.conflict && (err != nil || res.Status != StatusSuccess || res.Output != "1\n" || res.Kernel.ID != first.Kernel.ID):
			t.Errorf("%s: %+v, %v; want x == 1 on kernel %s", tc.name, res, err, first.Kernel.ID)
		}
	}
	if res := run(t, p, Request{Owner: "a", Code: "x"}); res.Output != "1\n" || res.Kernel.ID != first.Kernel.ID {
		t.Fatalf("after the conflicts: %+v; want x == 1 on kernel %s", res, first.Kernel.ID)
	}
}
