package pool_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// TestSessionToolSetIsFixed: a request on a session naming another tool
// set is refused (never a silent new kernel); the same set, or none,
// runs on the session's kernel.
func TestSessionToolSetIsFixed(t *testing.T) {
	p := newTestPool(t, func(c *pool.Config) { c.Tools = rpcsock.Factory{} })
	s := pool.MustSession(t, p, pool.SessionSpec{Owner: "t", Tools: []string{"search"}})
	first := run(t, p, pool.Request{Session: s.ID, Code: "x = 1"})
	before := p.Stats().KernelsStarted
	for _, tools := range [][]string{{"search", "fetch"}, {"fetch"}} {
		_, err := p.Execute(t.Context(), pool.Request{Session: s.ID, Tools: tools, Code: "x"})
		if !errors.Is(err, pool.ErrSessionMismatch) || !strings.Contains(err.Error(), "tool set") || !strings.Contains(err.Error(), "[search]") {
			t.Fatalf("tools %v on a [search] session: %v", tools, err)
		}
	}
	if _, err := p.Execute(t.Context(), pool.Request{Session: s.ID, Mode: "other", Code: "x"}); !errors.Is(err, pool.ErrSessionMismatch) {
		t.Fatalf("another mode on a session: %v", err)
	}
	for _, tools := range [][]string{{"search"}, nil} {
		res := run(t, p, pool.Request{Session: s.ID, Tools: tools, Code: "print(x)"})
		if res.Output != "1\n" || res.Kernel.ID != first.Kernel.ID {
			t.Fatalf("tools %v: %+v", tools, res)
		}
	}
	if n := p.Stats().KernelsStarted; n != before {
		t.Fatalf("%d kernels started by the refused and matching requests", n-before)
	}
}

// envPool is a pool with envscrub's scrubber and output pipeline; mode
// "allowed" passes STRIPE_SECRET_KEY through.
func envPool(t *testing.T, mods ...func(*pool.Config)) *pool.Pool {
	t.Helper()
	scrub, err := envscrub.New(envscrub.Config{
		Parent:          func() []string { return []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"} },
		ModePassthrough: map[string][]string{"allowed": {"STRIPE_SECRET_KEY"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := envscrub.OutputConfig{InlineCap: 1000, StderrCap: 1000, SpillCap: 100000}
	return newTestPool(t, append([]func(*pool.Config){func(c *pool.Config) {
		c.Env, c.Output, c.Modes = scrub, envscrub.NewPipeline(out), []string{"allowed"}
	}}, mods...)...)
}

// TestEnvVisibleAndRedacted: a session's env is the kernel's for its life,
// a request's for its cell only; both values are masked in stdout,
// stderr, the traceback, the exception, the variables listing and the
// spill, also in a later cell that prints a copy.
func TestEnvVisibleAndRedacted(t *testing.T) {
	p := envPool(t)
	const sessVal, cellVal = "sess-planted-0123456789", "cell-planted-9876543210"
	s := pool.MustSession(t, p, pool.SessionSpec{Owner: "e", Env: map[string]string{"SESS_VALUE": sessVal, "SHORT": "abc"}})
	res := run(t, p, pool.Request{Session: s.ID, Env: map[string]string{"CELL_VALUE": cellVal, "SHORT": "xyz"}, Code: `import os, sys
copy = os.environ["CELL_VALUE"]
print(os.environ["SESS_VALUE"] == "` + sessVal + `", copy == "` + cellVal + `", os.environ["SHORT"])
print(os.environ["SESS_VALUE"], copy)
print(copy, file=sys.stderr)
`})
	wantStatus(t, res, pool.StatusSuccess)
	if res.Stdout != "True True xyz\n*** ***\n" || res.Stderr != "***\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	res = run(t, p, pool.Request{Session: s.ID, Code: `import os
print(os.environ.get("CELL_VALUE"), os.environ["SHORT"])
raise ValueError(copy + " " + os.environ["SESS_VALUE"])`})
	wantStatus(t, res, pool.StatusError)
	if !strings.HasPrefix(res.Output, "None abc\n") || res.Exception == nil || res.Exception.EValue != "*** ***" {
		t.Fatalf("after the cell: output %q exception %+v", res.Output, res.Exception)
	}
	for name, text := range map[string]string{"output": res.Output, "error": res.Error, "traceback": strings.Join(res.Exception.Traceback, "")} {
		if strings.Contains(text, sessVal) || strings.Contains(text, cellVal) {
			t.Fatalf("%s leaks a value: %q", name, text)
		}
	}
	vars, err := p.Variables(t.Context(), res.Kernel.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range vars.Variables {
		if v.Name == "copy" {
			found = v.Repr == "'***'"
		}
	}
	if !found {
		t.Fatalf("variables = %+v, want copy masked", vars.Variables)
	}
	res = run(t, p, pool.Request{Session: s.ID, Code: "print('y' * 3000 + copy)"})
	if res.StdoutSpillPath == "" {
		t.Fatalf("no spill: %+v", res)
	}
	if b, err := os.ReadFile(res.StdoutSpillPath); err != nil || string(b) != strings.Repeat("y", 3000)+"***\n" {
		t.Fatalf("spill: %d bytes (%v), ends %q", len(b), err, b[max(0, len(b)-30):])
	}
	// So are displays (HTML from a _repr_html_).
	res = run(t, p, pool.Request{Session: s.ID, Code: "class H:\n    def _repr_html_(self): return '<b>' + copy + '</b>'\nH()"})
	var html string
	if len(res.Displays) != 1 || json.Unmarshal(res.Displays[0].Data["text/html"], &html) != nil || html != "<b>***</b>" {
		t.Fatalf("displays = %+v", res.Displays)
	}
	// Streamed output is masked as well.
	var streamed strings.Builder
	run(t, p, pool.Request{Session: s.ID, Code: "print(copy)", Stream: func(e pool.Event) { streamed.WriteString(e.Text) }})
	if strings.Contains(streamed.String(), cellVal) || !strings.Contains(streamed.String(), "***") {
		t.Fatalf("streamed = %q", streamed.String())
	}
}

// TestEnvBounds: 64 names and 32 KiB of names and values pass, one more
// name or byte is refused; reserved names and secret-shaped names are
// refused, the latter unless the mode's passthrough lists them.
func TestEnvBounds(t *testing.T) {
	p := envPool(t)
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("V%02d", i)] = "1"
		}
		return m
	}
	sized := func(total int) map[string]string { // "BIG" + value
		return map[string]string{"BIG": strings.Repeat("v", total-3)}
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		mode string
		want string // "" accepted, else a piece of the error
	}{
		{"64 names", many(64), "", ""},
		{"65 names", many(65), "", "65 names, the limit is 64"},
		{"32 KiB", sized(32 << 10), "", ""},
		{"32 KiB + 1", sized(32<<10 + 1), "", "32769 bytes of names and values, the limit is 32768"},
		{"reserved prefix", map[string]string{"KERNPOOL_X": "1"}, "", "reserved"},
		{"interpreter", map[string]string{"PYTHONSTARTUP": "/x"}, "", "reserved"},
		{"linker", map[string]string{"LD_PRELOAD": "/x"}, "", "reserved"},
		{"kernel's own", map[string]string{"HOME": "/x"}, "", "set by the kernel"},
		{"bad name", map[string]string{"A-B": "1"}, "", "must match"},
		{"NUL", map[string]string{"A": "x\x00y"}, "", "NUL"},
		{"refusal list", map[string]string{"OPENAI_API_KEY": "1"}, "allowed", "refused by"},
		{"secret name", map[string]string{"STRIPE_SECRET_KEY": "1"}, "", `contains "SECRET", and the profile's passthrough does not list it`},
		{"secret name the profile allows", map[string]string{"STRIPE_SECRET_KEY": "sk-allowed-0123456789"}, "allowed", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := p.Execute(t.Context(), pool.Request{Owner: "b", Mode: c.mode, Env: c.env, Code: "import os\nprint(sum(1 for k in os.environ if k.startswith(('V', 'BIG', 'STRIPE'))))"})
			_, serr := p.CreateSession(pool.SessionSpec{Owner: "b", Mode: c.mode, Env: c.env})
			if c.want == "" {
				if err != nil || serr != nil {
					t.Fatalf("refused: %v / %v", err, serr)
				}
				if want := fmt.Sprintf("%d\n", len(c.env)); res.Output != want {
					t.Fatalf("output %q, want %q", res.Output, want)
				}
				return
			}
			for _, e := range []error{err, serr} {
				if !errors.Is(e, pool.ErrBadRequest) || !strings.Contains(e.Error(), c.want) {
					t.Fatalf("error %v, want ErrBadRequest with %q", e, c.want)
				}
			}
		})
	}
}

// TestMaskedEnvBound: a kernel masks at most 1024 request env values;
// values it masks already do not count again, and one new value past the
// bound is refused.
func TestMaskedEnvBound(t *testing.T) {
	p := envPool(t)
	batch := func(n int) map[string]string {
		m := map[string]string{}
		for i := range 64 {
			m[fmt.Sprintf("V%02d", i)] = fmt.Sprintf("value-%04d-%02d", n, i)
		}
		return m
	}
	for n := range pool.MaxMaskedEnv / 64 {
		if _, err := p.Execute(t.Context(), pool.Request{Owner: "m", Env: batch(n), Code: "pass"}); err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
	}
	res := run(t, p, pool.Request{Owner: "m", Env: batch(3), Code: "import os\nprint(os.environ['V00'])"})
	if res.Output != "***\n" {
		t.Fatalf("a value masked before: %q", res.Output)
	}
	_, err := p.Execute(t.Context(), pool.Request{Owner: "m", Env: map[string]string{"NEW": "one-more-value"}, Code: "pass"})
	if !errors.Is(err, pool.ErrBadRequest) || !strings.Contains(err.Error(), "masks 1024 env values already, the limit is 1024") {
		t.Fatalf("value 1025: %v", err)
	}
}

// TestEnvMaskedAfterRestore: a request env value a cell copied into a
// global is masked in the key's next kernel too, after an eviction
// brought the global back from the checkpoint; a reset forgets it.
func TestEnvMaskedAfterRestore(t *testing.T) {
	const planted = "restored-planted-0123456789"
	p := pool.NewPersistPool(t, func(c *pool.Config) {
		c.MaxKernels = 1
		c.Output = envscrub.NewPipeline(envscrub.OutputConfig{InlineCap: 1000, StderrCap: 1000, SpillCap: 100000})
	})
	first := run(t, p, pool.Request{Owner: "a", Env: map[string]string{"CELL_SECRET": planted}, Code: "import os\ncopy = os.environ['CELL_SECRET']"})
	wantStatus(t, first, pool.StatusSuccess)
	run(t, p, pool.Request{Owner: "b", Code: "y = 1"}) // evicts a's kernel, saved
	pool.WaitSaved(t, p)
	res := run(t, p, pool.Request{Owner: "a", Code: "print(copy[:4], copy)"})
	if !res.Kernel.Restored || res.Kernel.ID == first.Kernel.ID || res.Output != "rest ***\n" {
		t.Fatalf("after the restore: %+v", res)
	}
	res = run(t, p, pool.Request{Owner: "a", Reset: true, Code: "print('" + planted + "')"})
	if res.Output != planted+"\n" {
		t.Fatalf("after a reset the value is the cell's own text again: %q", res.Output)
	}
}

// TestMaskedEnvBytesBound: a kernel masks at most 1 MiB of request env
// values; the value past it is refused.
func TestMaskedEnvBytesBound(t *testing.T) {
	p := envPool(t)
	value := func(i int) map[string]string {
		return map[string]string{"BIG": fmt.Sprintf("%05d", i) + strings.Repeat("v", 32760-5)}
	}
	for i := range pool.MaxMaskedEnvBytes / 32760 {
		if _, err := p.Execute(t.Context(), pool.Request{Owner: "mb", Env: value(i), Code: "pass"}); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	_, err := p.Execute(t.Context(), pool.Request{Owner: "mb", Env: value(99), Code: "pass"})
	if !errors.Is(err, pool.ErrBadRequest) || !strings.Contains(err.Error(), "masks 1048320 bytes of env values already, the limit is 1048576") {
		t.Fatalf("past the bytes bound: %v", err)
	}
}

// TestSessionOnASpare: a session's first cell claims a warm spare, whose
// bind gives it the session's env (masked like on a cold start).
func TestSessionOnASpare(t *testing.T) {
	const planted = "spare-planted-0123456789"
	p := envPool(t, func(c *pool.Config) { c.Warm = map[string]pool.Warm{"default": {Spares: 1}} })
	waitSpares(t, p, "default", 1)
	var spare string
	for _, k := range p.List() {
		if k.Spare {
			spare = k.ID
		}
	}
	s := pool.MustSession(t, p, pool.SessionSpec{Owner: "sp", Env: map[string]string{"SPARE_ENV": planted}})
	res := run(t, p, pool.Request{Session: s.ID, Code: "import os\nv = os.environ['SPARE_ENV']\nprint(v == '" + planted + "', v)"})
	if res.Kernel.ID != spare || res.Output != "True ***\n" {
		t.Fatalf("the session's first cell: %+v (spare %s)", res, spare)
	}
}

// TestEnvValueSpelling: a value with quotes, a backslash, a newline and
// non-ASCII text reaches os.environ exactly, and its repr is masked too.
func TestEnvValueSpelling(t *testing.T) {
	p := envPool(t)
	const odd = "a\"b\\c\nd 'é' €"
	want, _ := json.Marshal(odd)
	res := run(t, p, pool.Request{Owner: "o", Env: map[string]string{"ODD": odd}, Code: "import os, json\nv = os.environ['ODD']\nprint(v == json.loads(" + fmt.Sprintf("%q", string(want)) + "))\nprint(repr(v))"})
	if res.Output != "True\n'***'\n" {
		t.Fatalf("output = %q", res.Output)
	}
}

// TestDeathStderrRedacted: the stderr tail a dying kernel leaves, which
// the result's error quotes, is masked like the cell's output.
func TestDeathStderrRedacted(t *testing.T) {
	p := envPool(t)
	const planted = "death-planted-0123456789"
	s := pool.MustSession(t, p, pool.SessionSpec{Owner: "d", Env: map[string]string{"PLANTED": planted}})
	res := run(t, p, pool.Request{Session: s.ID, Code: "import os\nos.write(2, ('dying with ' + os.environ['PLANTED'] + '\\n').encode())\nos._exit(3)"})
	if strings.Contains(res.Error, planted) || !strings.Contains(res.Error, "died while running the cell: dying with ***") {
		t.Fatalf("a dying kernel's stderr in the error: %q", res.Error)
	}
}

// TestOwnerShutdownKeepsOtherOwnersMasks: shutting another owner down
// (b) forgets b's env masks only: a's value, restored from its
// checkpoint, is still masked.
func TestOwnerShutdownKeepsOtherOwnersMasks(t *testing.T) {
	const planted = "kept-planted-0123456789"
	p := pool.NewPersistPool(t, func(c *pool.Config) {
		c.MaxKernels = 1
		c.Output = envscrub.NewPipeline(envscrub.OutputConfig{InlineCap: 1000, StderrCap: 1000, SpillCap: 100000})
	})
	wantStatus(t, run(t, p, pool.Request{Owner: "a", Env: map[string]string{"CELL_SECRET": planted}, Code: "import os\ncopy = os.environ['CELL_SECRET']"}), pool.StatusSuccess)
	run(t, p, pool.Request{Owner: "b", Env: map[string]string{"B_SECRET": "b-planted-0123456789"}, Code: "y = 1"}) // evicts a's kernel, saved
	pool.WaitSaved(t, p)
	if n := p.ShutdownOwner("b"); n != 1 {
		t.Fatalf("ShutdownOwner(b) = %d, want 1", n)
	}
	res := run(t, p, pool.Request{Owner: "a", Code: "print(copy[:4], copy)"})
	if !res.Kernel.Restored || res.Output != "kept ***\n" {
		t.Fatalf("a's restored value after b's shutdown: %+v", res)
	}
}
