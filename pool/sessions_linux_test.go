package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/envscrub"
)

// Explicit sessions and request environments with real kernels.

func mustSession(t *testing.T, p *Pool, spec SessionSpec) SessionInfo {
	t.Helper()
	info, err := p.CreateSession(spec)
	if err != nil {
		t.Fatalf("CreateSession(%+v): %v", spec, err)
	}
	return info
}

// TestSessionBoundToItsOwner: two owners' sessions live at once; one's id
// is no session for the other, and a session's kernel is never the
// implicit kernel of the same parameters.
func TestSessionBoundToItsOwner(t *testing.T) {
	p := newTestPool(t)
	alice := mustSession(t, p, SessionSpec{Owner: "alice"})
	bob := mustSession(t, p, SessionSpec{Owner: "bob"})
	if len(alice.ID) != 33 || alice.ID[0] != 's' || alice.ID == bob.ID || alice.KernelID != "" {
		t.Fatalf("sessions = %+v, %+v", alice, bob)
	}
	wantStatus(t, run(t, p, Request{Session: alice.ID, Code: "who = 'alice'"}), StatusSuccess)
	wantStatus(t, run(t, p, Request{Session: bob.ID, Owner: "bob", Code: "who = 'bob'"}), StatusSuccess)
	_, err := p.Execute(t.Context(), Request{Session: alice.ID, Owner: "bob", Code: "print(who)"})
	if !errors.Is(err, ErrSessionNotFound) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob using alice's session: %v, want ErrSessionNotFound", err)
	}
	res := run(t, p, Request{Session: alice.ID, Owner: "alice", Code: "print(who)"})
	if res.Output != "alice\n" || res.Kernel.ExecutionCount != 2 {
		t.Fatalf("alice's second cell = %+v", res)
	}
	implicit := run(t, p, Request{Owner: "alice", Code: "print('who' in globals())"})
	if implicit.Output != "False\n" || implicit.Kernel.ID == res.Kernel.ID {
		t.Fatalf("alice's implicit kernel = %+v (session kernel %s)", implicit, res.Kernel.ID)
	}
	info, err := p.Session(alice.ID)
	if err != nil || info.KernelID != res.Kernel.ID || info.Owner != "alice" {
		t.Fatalf("Session = %+v, %v", info, err)
	}
	if id, err := p.SessionKernel(alice.ID); err != nil || id != res.Kernel.ID {
		t.Fatalf("SessionKernel = %q, %v", id, err)
	}
	if got := p.Sessions(func(o string) bool { return o == "bob" }); len(got) != 1 || got[0].ID != bob.ID {
		t.Fatalf("bob's sessions = %+v", got)
	}
	var sessOf string
	for _, k := range p.List() {
		if k.ID == res.Kernel.ID {
			sessOf = k.Session
		}
	}
	if sessOf != alice.ID {
		t.Fatalf("ps shows session %q for alice's session kernel", sessOf)
	}
	pid := pidOf(t, p, res.Kernel.ID)
	if err := p.DeleteSession(alice.ID); err != nil {
		t.Fatal(err)
	}
	assertDead(t, pid)
	if _, err := p.Execute(t.Context(), Request{Session: alice.ID, Code: "1"}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("execute on a deleted session: %v", err)
	}
	if err := p.DeleteSession(alice.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// The owner's shutdown ends its sessions.
	p.ShutdownOwner("bob")
	if _, err := p.Session(bob.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's session after his shutdown: %v", err)
	}
}

// TestSessionToolSetIsFixed: a request on a session naming another tool
// set is refused (never a silent new kernel); the same set, or none,
// runs on the session's kernel.
func TestSessionToolSetIsFixed(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.Tools = rpcFactory{} })
	s := mustSession(t, p, SessionSpec{Owner: "t", Tools: []string{"search"}})
	first := run(t, p, Request{Session: s.ID, Code: "x = 1"})
	before := p.Stats().KernelsStarted
	for _, tools := range [][]string{{"search", "fetch"}, {"fetch"}} {
		_, err := p.Execute(t.Context(), Request{Session: s.ID, Tools: tools, Code: "x"})
		if !errors.Is(err, ErrSessionMismatch) || !strings.Contains(err.Error(), "tool set") || !strings.Contains(err.Error(), "[search]") {
			t.Fatalf("tools %v on a [search] session: %v", tools, err)
		}
	}
	if _, err := p.Execute(t.Context(), Request{Session: s.ID, Mode: "other", Code: "x"}); !errors.Is(err, ErrSessionMismatch) {
		t.Fatalf("another mode on a session: %v", err)
	}
	for _, tools := range [][]string{{"search"}, nil} {
		res := run(t, p, Request{Session: s.ID, Tools: tools, Code: "print(x)"})
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
func envPool(t *testing.T, mods ...func(*Config)) *Pool {
	t.Helper()
	scrub, err := envscrub.New(envscrub.Config{
		Parent:          func() []string { return []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"} },
		ModePassthrough: map[string][]string{"allowed": {"STRIPE_SECRET_KEY"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := envscrub.OutputConfig{InlineCap: 1000, StderrCap: 1000, SpillCap: 100000}
	return newTestPool(t, append([]func(*Config){func(c *Config) {
		c.Env, c.Output, c.Modes = scrub, realOutput{out}, []string{"allowed"}
	}}, mods...)...)
}

// TestEnvVisibleAndRedacted: a session's env is the kernel's for its life,
// a request's for its cell only; both values are masked in stdout,
// stderr, the traceback, the exception, the variables listing and the
// spill, also in a later cell that prints a copy.
func TestEnvVisibleAndRedacted(t *testing.T) {
	p := envPool(t)
	const sessVal, cellVal = "sess-planted-0123456789", "cell-planted-9876543210"
	s := mustSession(t, p, SessionSpec{Owner: "e", Env: map[string]string{"SESS_VALUE": sessVal, "SHORT": "abc"}})
	res := run(t, p, Request{Session: s.ID, Env: map[string]string{"CELL_VALUE": cellVal, "SHORT": "xyz"}, Code: `import os, sys
copy = os.environ["CELL_VALUE"]
print(os.environ["SESS_VALUE"] == "` + sessVal + `", copy == "` + cellVal + `", os.environ["SHORT"])
print(os.environ["SESS_VALUE"], copy)
print(copy, file=sys.stderr)
`})
	wantStatus(t, res, StatusSuccess)
	if res.Stdout != "True True xyz\n*** ***\n" || res.Stderr != "***\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	res = run(t, p, Request{Session: s.ID, Code: `import os
print(os.environ.get("CELL_VALUE"), os.environ["SHORT"])
raise ValueError(copy + " " + os.environ["SESS_VALUE"])`})
	wantStatus(t, res, StatusError)
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
	res = run(t, p, Request{Session: s.ID, Code: "print('y' * 3000 + copy)"})
	if res.StdoutSpillPath == "" {
		t.Fatalf("no spill: %+v", res)
	}
	if b, err := os.ReadFile(res.StdoutSpillPath); err != nil || string(b) != strings.Repeat("y", 3000)+"***\n" {
		t.Fatalf("spill: %d bytes (%v), ends %q", len(b), err, b[max(0, len(b)-30):])
	}
	// So are displays (HTML from a _repr_html_).
	res = run(t, p, Request{Session: s.ID, Code: "class H:\n    def _repr_html_(self): return '<b>' + copy + '</b>'\nH()"})
	var html string
	if len(res.Displays) != 1 || json.Unmarshal(res.Displays[0].Data["text/html"], &html) != nil || html != "<b>***</b>" {
		t.Fatalf("displays = %+v", res.Displays)
	}
	// Streamed output is masked as well.
	var streamed strings.Builder
	run(t, p, Request{Session: s.ID, Code: "print(copy)", Stream: func(e Event) { streamed.WriteString(e.Text) }})
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
			res, err := p.Execute(t.Context(), Request{Owner: "b", Mode: c.mode, Env: c.env, Code: "import os\nprint(sum(1 for k in os.environ if k.startswith(('V', 'BIG', 'STRIPE'))))"})
			_, serr := p.CreateSession(SessionSpec{Owner: "b", Mode: c.mode, Env: c.env})
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
				if !errors.Is(e, ErrBadRequest) || !strings.Contains(e.Error(), c.want) {
					t.Fatalf("error %v, want ErrBadRequest with %q", e, c.want)
				}
			}
		})
	}
}

// TestSessionSurvivesEviction: with persist on, a session whose kernel is
// evicted keeps its id, and its next cell restores its state on a new
// kernel; a restart loses the state and keeps the session.
func TestSessionSurvivesEviction(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 1 })
	s := mustSession(t, p, SessionSpec{Owner: "a", Env: map[string]string{"SESS_ENV": "kept"}})
	first := run(t, p, Request{Session: s.ID, Code: "x = 41"})
	run(t, p, Request{Owner: "other", Code: "y = 1"}) // evicts the session's kernel
	waitSaved(t, p)
	if info, err := p.Session(s.ID); err != nil || info.KernelID != "" {
		t.Fatalf("session after eviction = %+v, %v", info, err)
	}
	if _, err := p.SessionKernel(s.ID); !errors.Is(err, ErrIdle) {
		t.Fatalf("SessionKernel after eviction: %v", err)
	}
	res := run(t, p, Request{Session: s.ID, Code: "import os\nprint(x + 1, os.environ['SESS_ENV'])"})
	if res.Output != "42 kept\n" || !res.Kernel.Restored || res.Kernel.ID == first.Kernel.ID {
		t.Fatalf("after eviction: %+v", res)
	}
	killed, err := p.RestartSession(s.ID)
	if err != nil || killed != res.Kernel.ID {
		t.Fatalf("RestartSession = %q, %v", killed, err)
	}
	res = run(t, p, Request{Session: s.ID, Code: "print('x' in globals())"})
	if res.Output != "False\n" || res.Kernel.Restored {
		t.Fatalf("after restart: %+v", res)
	}
	if _, err := p.Execute(context.Background(), Request{Session: "s0000", Code: "1"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

// TestSessionBounds: max_sessions_per_owner and max_sessions refuse the
// create past them (ErrQuota); an ended session frees its place.
func TestSessionBounds(t *testing.T) {
	p := newTestPool(t, func(c *Config) { c.Sessions = SessionConfig{MaxSessions: 3, MaxSessionsPerOwner: 2} })
	a1 := mustSession(t, p, SessionSpec{Owner: "a"})
	mustSession(t, p, SessionSpec{Owner: "a"})
	if _, err := p.CreateSession(SessionSpec{Owner: "a"}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), `owner "a" holds 2 sessions`) {
		t.Fatalf("a's third session: %v", err)
	}
	mustSession(t, p, SessionSpec{Owner: "b"})
	if _, err := p.CreateSession(SessionSpec{Owner: "c"}); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "holds 3 sessions") {
		t.Fatalf("the pool's fourth session: %v", err)
	}
	if err := p.DeleteSession(a1.ID); err != nil {
		t.Fatal(err)
	}
	mustSession(t, p, SessionSpec{Owner: "c"})
}

// TestSessionIdleExpiry: a session without a kernel that nobody used for
// session_idle_timeout ends by itself.
func TestSessionIdleExpiry(t *testing.T) {
	p := newTestPool(t, func(c *Config) {
		c.ReapInterval = 10 * time.Millisecond
		c.Sessions.IdleTimeout = time.Millisecond
	})
	s := mustSession(t, p, SessionSpec{Owner: "idle"})
	waitFor(t, "the idle session to end", func() bool {
		_, err := p.Session(s.ID)
		return errors.Is(err, ErrNotFound)
	})
}

// TestSessionDeletedDuringCell: deleting a session interrupts its running
// cell and leaves no kernel behind for it, also for a caller queued on it.
func TestSessionDeletedDuringCell(t *testing.T) {
	p := newTestPool(t)
	s := mustSession(t, p, SessionSpec{Owner: "d"})
	run(t, p, Request{Session: s.ID, Code: "x = 1"})
	type out struct {
		res *Result
		err error
	}
	running, queued := make(chan out, 1), make(chan out, 1)
	go func() {
		res, err := p.Execute(context.Background(), Request{Session: s.ID, Code: "import time\nwhile True: time.sleep(0.01)"})
		running <- out{res, err}
	}()
	waitFor(t, "the session's cell to run", func() bool {
		for _, k := range p.List() {
			if k.Session == s.ID && k.Busy {
				return true
			}
		}
		return false
	})
	go func() {
		res, err := p.Execute(context.Background(), Request{Session: s.ID, Code: "x"})
		queued <- out{res, err}
	}()
	waitFor(t, "the second caller to queue", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		sl := p.slots[key{owner: "d", mode: defaultName, interpreter: p.cfg.DefaultInterpreter, session: s.ID}]
		return sl != nil && sl.users == 2
	})
	if err := p.DeleteSession(s.ID); err != nil {
		t.Fatal(err)
	}
	if o := <-running; o.err != nil || o.res.Status != StatusInterrupted {
		t.Fatalf("the running cell: %+v, %v", o.res, o.err)
	}
	if o := <-queued; !errors.Is(o.err, ErrSessionNotFound) {
		t.Fatalf("the queued cell: %+v, %v", o.res, o.err)
	}
	for _, k := range p.List() {
		if k.Session == s.ID {
			t.Fatalf("a kernel of the deleted session lives: %+v", k)
		}
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
	for n := range maxMaskedEnv / 64 {
		if _, err := p.Execute(t.Context(), Request{Owner: "m", Env: batch(n), Code: "pass"}); err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
	}
	res := run(t, p, Request{Owner: "m", Env: batch(3), Code: "import os\nprint(os.environ['V00'])"})
	if res.Output != "***\n" {
		t.Fatalf("a value masked before: %q", res.Output)
	}
	_, err := p.Execute(t.Context(), Request{Owner: "m", Env: map[string]string{"NEW": "one-more-value"}, Code: "pass"})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "masks 1024 env values already, the limit is 1024") {
		t.Fatalf("value 1025: %v", err)
	}
}

// TestCloseDropsSessionCheckpoints: sessions end with the pool, so Close
// deletes their checkpoints (an evicted session kernel's) and does not
// save their live kernels.
func TestCloseDropsSessionCheckpoints(t *testing.T) {
	p := newPersistPool(t, func(c *Config) { c.MaxKernels = 2 })
	s := mustSession(t, p, SessionSpec{Owner: "a"})
	run(t, p, Request{Session: s.ID, Code: "x = 1"})
	run(t, p, Request{Owner: "b", Code: "y = 2"})
	run(t, p, Request{Owner: "c", Code: "z = 3"}) // evicts the session's kernel
	waitSaved(t, p)
	if n := len(ckptFiles(t, p)); n != 1 {
		t.Fatalf("%d checkpoints after the eviction, want the session's", n)
	}
	run(t, p, Request{Owner: "b", Code: "y"})
	s2 := mustSession(t, p, SessionSpec{Owner: "d"})
	run(t, p, Request{Session: s2.ID, Code: "w = 4"}) // evicts c (saved), s2's kernel is live at Close
	waitSaved(t, p)
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, c := range p.Checkpoints() {
		owners = append(owners, c.Owner)
	}
	if strings.Join(owners, ",") != "b,c" {
		t.Fatalf("checkpoints after Close: %v, want b's and c's only", owners)
	}
}

// TestEnvMaskedAfterRestore: a request env value a cell copied into a
// global is masked in the key's next kernel too, after an eviction
// brought the global back from the checkpoint; a reset forgets it.
func TestEnvMaskedAfterRestore(t *testing.T) {
	const planted = "restored-planted-0123456789"
	p := newPersistPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Output = realOutput{envscrub.OutputConfig{InlineCap: 1000, StderrCap: 1000, SpillCap: 100000}}
	})
	first := run(t, p, Request{Owner: "a", Env: map[string]string{"CELL_SECRET": planted}, Code: "import os\ncopy = os.environ['CELL_SECRET']"})
	wantStatus(t, first, StatusSuccess)
	run(t, p, Request{Owner: "b", Code: "y = 1"}) // evicts a's kernel, saved
	waitSaved(t, p)
	res := run(t, p, Request{Owner: "a", Code: "print(copy[:4], copy)"})
	if !res.Kernel.Restored || res.Kernel.ID == first.Kernel.ID || res.Output != "rest ***\n" {
		t.Fatalf("after the restore: %+v", res)
	}
	res = run(t, p, Request{Owner: "a", Reset: true, Code: "print('" + planted + "')"})
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
	for i := range maxMaskedEnvBytes / 32760 {
		if _, err := p.Execute(t.Context(), Request{Owner: "mb", Env: value(i), Code: "pass"}); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	_, err := p.Execute(t.Context(), Request{Owner: "mb", Env: value(99), Code: "pass"})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "masks 1048320 bytes of env values already, the limit is 1048576") {
		t.Fatalf("past the bytes bound: %v", err)
	}
}

// TestSessionOnASpare: a session's first cell claims a warm spare, whose
// bind gives it the session's env (masked like on a cold start).
func TestSessionOnASpare(t *testing.T) {
	const planted = "spare-planted-0123456789"
	p := envPool(t, func(c *Config) { c.Warm = map[string]Warm{"default": {Spares: 1}} })
	waitSpares(t, p, "default", 1)
	var spare string
	for _, k := range p.List() {
		if k.Spare {
			spare = k.ID
		}
	}
	s := mustSession(t, p, SessionSpec{Owner: "sp", Env: map[string]string{"SPARE_ENV": planted}})
	res := run(t, p, Request{Session: s.ID, Code: "import os\nv = os.environ['SPARE_ENV']\nprint(v == '" + planted + "', v)"})
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
	res := run(t, p, Request{Owner: "o", Env: map[string]string{"ODD": odd}, Code: "import os, json\nv = os.environ['ODD']\nprint(v == json.loads(" + fmt.Sprintf("%q", string(want)) + "))\nprint(repr(v))"})
	if res.Output != "True\n'***'\n" {
		t.Fatalf("output = %q", res.Output)
	}
}
