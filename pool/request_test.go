package pool

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

func TestNormalizeRejectsBadRequests(t *testing.T) {
	testenv.RequirePython(t)
	dir := testTempDir(t)
	file := filepath.Join(dir, "plain.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newTestPool(t)
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"relative interpreter", Request{Interpreter: "python3"}, "interpreter must be an absolute path"},
		{"missing interpreter", Request{Interpreter: "/nonexistent/python3"}, "interpreter /nonexistent/python3"},
		{"interpreter not executable", Request{Interpreter: file}, "is not executable"},
		{"interpreter is a dir", Request{Interpreter: dir}, "is not a regular file"},
		{"relative cwd", Request{Cwd: "tmp"}, "cwd must be an absolute path"},
		{"missing cwd", Request{Cwd: filepath.Join(dir, "nope")}, "does not exist"},
		{"cwd is a file", Request{Cwd: file}, "is not a directory"},
		{"bad tool name", Request{Tools: []string{"ok", "no-dash"}}, `tool name "no-dash"`},
		{"tool name starts with digit", Request{Tools: []string{"1abc"}}, `tool name "1abc"`},
		{"tool name too long", Request{Tools: []string{strings.Repeat("a", 65)}}, "tool name"},
		{"tools without tool server", Request{Tools: []string{"search"}}, "has no tool server"},
		{"owner too long", Request{Owner: strings.Repeat("o", 300)}, "owner is 300 bytes long"},
		{"owner with newline", Request{Owner: "a\nb"}, "non-printable"},
		{"mode with NUL", Request{Mode: "a\x00"}, "non-printable"},
		{"owner invalid utf8", Request{Owner: "\xff"}, "not valid UTF-8"},
		{"negative timeout", Request{Timeout: -time.Second}, "timeout must not be negative"},
		{"negative tool budget", Request{MaxToolCalls: -1}, "max_tool_calls"},
		{"negative limits", Request{Limits: Limits{MemoryMax: -1}}, "limits must not be negative"},
		{"bad passthrough", Request{Passthrough: []string{"A=B"}}, "passthrough name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Execute(t.Context(), tc.req)
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("err = %v (result %+v), want ErrBadRequest", err, res)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to name %q", err, tc.want)
			}
		})
	}
	if n := len(p.List()); n != 0 {
		t.Fatalf("bad requests started %d kernels", n)
	}
}

func TestNormalizeDefaults(t *testing.T) {
	testenv.RequirePython(t)
	p := newTestPool(t, func(c *Config) { c.CellTimeout = 7 * time.Second; c.MaxCellTimeout = 9 * time.Second })
	p.cfg.Tools = fakeToolFactory{} // only checked for nil here
	rq, err := p.normalize(Request{Tools: []string{"b", "a", "b"}, Cwd: "/tmp/../tmp"})
	if err != nil {
		t.Fatal(err)
	}
	want := key{owner: "default", mode: "default", interpreter: testenv.Python, cwd: "/tmp", tools: "a,b"}
	if rq.key != want {
		t.Fatalf("key = %+v, want %+v", rq.key, want)
	}
	if !slices.Equal(rq.tools, []string{"a", "b"}) || rq.timeout != 7*time.Second || rq.budget != DefaultMaxToolCalls {
		t.Fatalf("normalized = %+v", rq)
	}
	if _, ok := rq.handler.(refuseTools); !ok {
		t.Fatalf("nil handler not replaced by the refusing one: %T", rq.handler)
	}
	rq, err = p.normalize(Request{Timeout: time.Hour, MaxToolCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rq.timeout != 9*time.Second || rq.budget != 3 {
		t.Fatalf("timeout %s (want clamped to 9s), budget %d", rq.timeout, rq.budget)
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	stateDir := "/x"
	if runtime.GOOS == "windows" {
		stateDir = `C:\x` // "/x" is not absolute there
	}
	cfg, err := Config{StateDir: stateDir}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IdleTimeout != DefaultIdleTimeout || cfg.CellTimeout != DefaultCellTimeout ||
		cfg.MaxCellTimeout != DefaultMaxCellTimeout || cfg.MaxKernels != DefaultMaxKernels ||
		cfg.MaxToolCalls != DefaultMaxToolCalls || cfg.ReapInterval != 300*time.Second || cfg.Logger == nil {
		t.Fatalf("defaults = %+v", cfg)
	}
	for _, tc := range []struct {
		idle, want time.Duration
	}{{60 * time.Second, 30 * time.Second}, {600 * time.Second, 100 * time.Second}, {6 * time.Hour, 300 * time.Second}} {
		cfg, err := Config{StateDir: stateDir, IdleTimeout: tc.idle}.withDefaults()
		if err != nil || cfg.ReapInterval != tc.want {
			t.Errorf("idle %s: reap interval %s, want %s (err %v)", tc.idle, cfg.ReapInterval, tc.want, err)
		}
	}
	for name, cfg := range map[string]Config{
		"no state dir":          {},
		"relative state dir":    {StateDir: "state"},
		"relative interpreter":  {StateDir: stateDir, DefaultInterpreter: "python3"},
		"negative idle timeout": {StateDir: stateDir, IdleTimeout: -1},
		"negative max kernels":  {StateDir: stateDir, MaxKernels: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
}

func TestMinimalEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/root", "LC_ALL=C", "OPENAI_API_KEY=sk-x", "DATABASE_URL=pg://",
		"TERM=xterm", "Path=C:\\x", "SystemRoot=C:\\Windows", "noequals", "=C:=C:\\"}
	got := minimalEnv(environ, "linux")
	if want := []string{"PATH=/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm"}; !slices.Equal(got, want) {
		t.Fatalf("linux env = %q, want %q", got, want)
	}
	got = minimalEnv(environ, "windows")
	if want := []string{"PATH=/bin", "HOME=/root", "LC_ALL=C", "TERM=xterm", "Path=C:\\x", "SystemRoot=C:\\Windows"}; !slices.Equal(got, want) {
		t.Fatalf("windows env = %q, want %q", got, want)
	}
}

func TestFormatTimeoutAndIDs(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Second: "30s", 90 * time.Second: "90s", 2 * time.Hour: "7200s", 1500 * time.Millisecond: "1.5s", 250 * time.Millisecond: "250ms"} {
		if got := formatTimeout(d); got != want {
			t.Errorf("formatTimeout(%s) = %q, want %q", d, got, want)
		}
	}
	seen := map[string]bool{}
	for range 100 {
		id := newKernelID()
		if len(id) != 17 || id[0] != 'k' || strings.Trim(id[1:], "0123456789abcdef") != "" || seen[id] {
			t.Fatalf("bad or repeated kernel id %q", id)
		}
		seen[id] = true
	}
}

// An owner may be 256 bytes long and a mode 64, not a byte more: a name
// at the bound is a key like any other.
func TestNameBoundsAreInclusive(t *testing.T) {
	p := newTestPool(t)
	for _, tc := range []struct {
		name string
		req  Request
		ok   bool
	}{
		{"owner of 256 bytes", Request{Owner: strings.Repeat("o", 256)}, true},
		{"owner of 257 bytes", Request{Owner: strings.Repeat("o", 257)}, false},
		{"mode of 64 bytes", Request{Mode: strings.Repeat("m", 64)}, true},
		{"mode of 65 bytes", Request{Mode: strings.Repeat("m", 65)}, false},
	} {
		rq, err := p.normalize(tc.req)
		switch {
		case tc.ok && (err != nil || rq.key.owner != cmp.Or(tc.req.Owner, "default") || rq.key.mode != cmp.Or(tc.req.Mode, "default")):
			t.Errorf("%s: key %+v, err %v; want it accepted as given", tc.name, rq.key, err)
		case !tc.ok && !errors.Is(err, ErrBadRequest):
			t.Errorf("%s: err %v, want ErrBadRequest", tc.name, err)
		}
	}
}

// Tool names are [A-Za-z_][A-Za-z0-9_]{0,63} (docs/openapi.json): every digit
// after the first character, up to 64 characters.
func TestToolNameSpelling(t *testing.T) {
	for name, ok := range map[string]bool{
		"t0": true, "t9": true, "_": true, "Zz_09": true, strings.Repeat("a", 64): true, "A": true, "a": true, "z": true,
		"": false, "0t": false, "9": false, "t-0": false, strings.Repeat("a", 65): false,
	} {
		if got := validToolName(name); got != ok {
			t.Errorf("validToolName(%q) = %v, want %v", name, got, ok)
		}
	}
}

// A request may name 256 tools (docs/openapi.json maxItems), not one
// more; the 256 make one key, sorted.
func TestToolCountBoundIsInclusive(t *testing.T) {
	p := newTestPool(t)
	p.cfg.Tools = fakeToolFactory{} // only checked for nil here
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("t%03d", n-1-i) // given in reverse order
		}
		return out
	}
	rq, err := p.normalize(Request{Tools: names(256)})
	if err != nil || len(rq.tools) != 256 || rq.tools[0] != "t000" || rq.tools[255] != "t255" {
		t.Fatalf("256 tools: %d tools (%v), want all 256 sorted", len(rq.tools), err)
	}
	if _, err := p.normalize(Request{Tools: names(257)}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "257 tools requested, the limit is 256") {
		t.Fatalf("257 tools: %v, want ErrBadRequest naming the limit", err)
	}
}
