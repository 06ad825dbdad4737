package pool

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestSessionInfoListsAreNeverNull: a session's tools and env_names are
// required arrays (docs/openapi.json SessionInfo): [] when it has none,
// never null, and its own sorted names when it has some.
func TestSessionInfoListsAreNeverNull(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.Tools = fakeToolFactory{rec: &toolRecorder{}} })
	for _, c := range []struct {
		name            string
		spec            SessionSpec
		tools, envNames []string
		json            string
	}{
		{"none", SessionSpec{Owner: "n"}, []string{}, []string{}, `"tools":[],"env_names":[]`},
		{"some", SessionSpec{Owner: "s", Tools: []string{"b", "a"}, Env: map[string]string{"Y": "1", "X": "2"}},
			[]string{"a", "b"}, []string{"X", "Y"}, `"tools":["a","b"],"env_names":["X","Y"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			created, err := p.CreateSession(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Session(created.ID)
			if err != nil {
				t.Fatal(err)
			}
			listed := p.Sessions(func(o string) bool { return o == c.spec.Owner })
			if len(listed) != 1 {
				t.Fatalf("listed %+v", listed)
			}
			for how, info := range map[string]SessionInfo{"create": created, "get": got, "list": listed[0]} {
				if info.Tools == nil || info.EnvNames == nil || !slices.Equal(info.Tools, c.tools) || !slices.Equal(info.EnvNames, c.envNames) {
					t.Fatalf("%s: tools %#v env_names %#v, want %#v %#v", how, info.Tools, info.EnvNames, c.tools, c.envNames)
				}
				b, err := json.Marshal(info)
				if err != nil || !strings.Contains(string(b), c.json) {
					t.Fatalf("%s: JSON %s (%v), want %s", how, b, err, c.json)
				}
			}
		})
	}
}

// TestSessionIdleTimeoutDefault: a pool configured without
// session_idle_timeout keeps an unused session for 24 h (docs/config.md)
// exactly, and ends it the nanosecond after.
func TestSessionIdleTimeoutDefault(t *testing.T) {
	p := newTestPool(t)
	if got := p.cfg.Sessions.IdleTimeout; got != 24*time.Hour {
		t.Fatalf("default session idle timeout = %v, want 24h", got)
	}
	s, err := p.CreateSession(SessionSpec{Owner: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	used := p.sessions[s.ID].lastUsed
	kept := p.expireSessionsLocked(used.Add(24 * time.Hour))
	_, stays := p.sessions[s.ID]
	expired := p.expireSessionsLocked(used.Add(24*time.Hour + time.Nanosecond))
	p.mu.Unlock()
	if len(kept) != 0 || !stays {
		t.Fatalf("at exactly 24h idle: expired %v, session kept %v", kept, stays)
	}
	if len(expired) != 1 || expired[0].session != s.ID {
		t.Fatalf("1ns past 24h idle: expired %v, want the session's key", expired)
	}
	if _, err := p.Session(s.ID); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("the expired session: %v", err)
	}
}

// TestSessionFieldsCompareClean: a session request naming the session's
// own interpreter or cwd in an unclean spelling runs on its kernel;
// naming another is refused (ErrSessionMismatch, 409 session_mismatch)
// and starts nothing.
func TestSessionFieldsCompareClean(t *testing.T) {
	p := newTestPool(t)
	dir, other := testTempDir(t), testTempDir(t)
	py := testenv.Python
	s, err := p.CreateSession(SessionSpec{Owner: "c", Interpreter: py, Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	first := run(t, p, Request{Session: s.ID, Code: "x = 1"})
	before := p.Stats().KernelsStarted
	for _, c := range []struct {
		name          string
		interp, cwd   string
		mismatchField string // "" accepted
	}{
		{"own interpreter unclean", filepath.Dir(py) + "//./" + filepath.Base(py), "", ""},
		{"own cwd unclean", "", dir + "/./", ""},
		{"both unclean", filepath.Dir(py) + "/../" + filepath.Base(filepath.Dir(py)) + "/" + filepath.Base(py), dir + "//", ""},
		{"another interpreter", filepath.Join(filepath.Dir(py), "python-other"), "", "interpreter"},
		{"another cwd", "", other, "cwd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := p.Execute(t.Context(), Request{Session: s.ID, Interpreter: c.interp, Cwd: c.cwd, Code: "print(x)"})
			if c.mismatchField != "" {
				if !errors.Is(err, ErrSessionMismatch) || !strings.Contains(err.Error(), "the request's "+c.mismatchField+" ") {
					t.Fatalf("got %+v, %v; want ErrSessionMismatch on the %s", res, err, c.mismatchField)
				}
				return
			}
			if err != nil || res.Output != "1\n" || res.Kernel.ID != first.Kernel.ID {
				t.Fatalf("got %+v, %v; want the session's kernel (%s)", res, err, first.Kernel.ID)
			}
		})
	}
	if n := p.Stats().KernelsStarted; n != before {
		t.Fatalf("%d kernels started by the matching and refused requests", n-before)
	}
}
