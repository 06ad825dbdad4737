package pool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// killOnTimeout configures the reference's timeout_action "kill".
func killOnTimeout(c *Config) {
	c.Policies = map[string]CellPolicy{defaultName: {TimeoutAction: TimeoutKill}}
}

// The timeout's interrupt ends the cell and keeps the kernel's state. The
// grace is generous: on a loaded host the default 2 s could run out before
// the interpreter handles KeyboardInterrupt, which this test does not
// check (TestTimeoutGraceKillsStubbornCell does).
func TestTimeoutInterruptKeepsVariables(t *testing.T) {
	p := newTestPool(t, func(c *Config) {
		c.Policies = map[string]CellPolicy{defaultName: {InterruptGrace: testenv.Patience}}
	})
	warm := run(t, p, Request{Code: "x = 1"})
	// The timeout outlasts the two statements before the sleep: they
	// compile and run at once, so the interrupt lands in time.sleep.
	res := run(t, p, Request{Code: "import time\nx = 2\nprint('started', flush=True)\ntime.sleep(300)", Timeout: time.Second})
	wantStatus(t, res, StatusTimeout)
	if !res.Kernel.StatePreserved || res.ExitCode != -1 || !strings.Contains(res.Error, "Its variables and imports survived") ||
		!strings.HasPrefix(res.Output, "started\n") || strings.Contains(res.Output, "_on_sigint") {
		t.Fatalf("timeout result = %+v", res)
	}
	next := run(t, p, Request{Code: "x"})
	if next.Output != "2\n" || next.Kernel.ID != warm.Kernel.ID || !next.Kernel.StatePreserved {
		t.Fatalf("after the timeout = %+v", next)
	}
}

func TestTimeoutGraceKillsStubbornCell(t *testing.T) {
	p := newTestPool(t, func(c *Config) {
		c.Policies = map[string]CellPolicy{defaultName: {InterruptGrace: 300 * time.Millisecond}}
	})
	warm := run(t, p, Request{Code: "x = 1"})
	pid := pidOf(t, p, warm.Kernel.ID)
	code := "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
	res := run(t, p, Request{Code: code, Timeout: 200 * time.Millisecond})
	wantStatus(t, res, StatusTimeout)
	want := "Cell timed out after 200ms and did not stop within the 300ms interrupt grace; the session kernel was killed and its state was lost. The next call starts a fresh kernel."
	if res.Kernel.StatePreserved || res.Error != want {
		t.Fatalf("result = %+v", res)
	}
	assertDead(t, pid)
}

// SetPolicies (the daemon's reload) changes what the next timeout does
// on a kernel already running; a policy that does not validate is
// refused and the running one stays.
func TestSetPoliciesAppliesToNextCell(t *testing.T) {
	p := newTestPool(t)
	warm := run(t, p, Request{Code: "x = 1"})
	pid := pidOf(t, p, warm.Kernel.ID)
	if err := p.SetPolicies(map[string]CellPolicy{defaultName: {TimeoutAction: "pause"}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("SetPolicies with timeout action \"pause\": %v, want ErrBadRequest", err)
	}
	sleep := Request{Code: "import time\ntime.sleep(30)", Timeout: 300 * time.Millisecond}
	if res := run(t, p, sleep); res.Status != StatusTimeout || !res.Kernel.StatePreserved {
		t.Fatalf("timeout under the default policy (interrupt) = %+v", res)
	}
	if err := p.SetPolicies(map[string]CellPolicy{defaultName: {TimeoutAction: TimeoutKill}}); err != nil {
		t.Fatal(err)
	}
	res := run(t, p, sleep)
	if res.Status != StatusTimeout || res.Kernel.StatePreserved || res.Kernel.ID != warm.Kernel.ID {
		t.Fatalf("timeout after SetPolicies(kill) = %+v", res)
	}
	assertDead(t, pid)
}

func TestSysExitCode(t *testing.T) {
	p := newTestPool(t)
	res := run(t, p, Request{Code: "import sys\nsys.exit(3)"})
	if res.ExitCode != 3 || !res.Kernel.Ended || res.Kernel.StatePreserved {
		t.Fatalf("sys.exit(3) = %+v", res)
	}
}

func TestPoolInterruptAndVariables(t *testing.T) {
	p := newTestPool(t)
	warm := run(t, p, Request{Owner: "o", Code: "y = [1, 2]"})
	id := warm.Kernel.ID
	if err := p.Interrupt(id); err == nil || !strings.Contains(err.Error(), "no cell is running") {
		t.Fatalf("idle interrupt: %v", err)
	}
	v, err := p.Variables(t.Context(), id)
	if err != nil || len(v.Variables) != 1 || v.Variables[0].Name != "y" || v.Variables[0].Repr != "[1, 2]" {
		t.Fatalf("variables %+v, %v", v, err)
	}
	b := startBlocker(t, p, t.Context(), Request{Owner: "o"})
	if _, err := p.Variables(t.Context(), id); err == nil || !strings.Contains(err.Error(), "running a cell") {
		t.Fatalf("variables while busy: %v", err)
	}
	if ids := p.InterruptOwner("o", ""); len(ids) != 1 || ids[0] != id {
		t.Fatalf("interrupted %v", ids)
	}
	res := b.wait(t)
	wantStatus(t, res, StatusInterrupted)
	if !res.Kernel.StatePreserved || !strings.Contains(res.Error, "interrupted by request") {
		t.Fatalf("interrupted = %+v", res)
	}
}

// The streamer masks a secret cut across two chunks, strips ANSI across
// them, and sends no more than the inline cap.
func TestStreamerRedactsAcrossChunks(t *testing.T) {
	const secret = "sk-live-0123456789abcdefghij"
	f := envscrub.NewPipeline(envscrub.OutputConfig{InlineCap: 20000}).ForKernel([]string{secret})
	var mu sync.Mutex
	var got strings.Builder
	s := newStreamer(f, func(e Event) { mu.Lock(); got.WriteString(e.Text); mu.Unlock() })
	s.partialAfter = 0 // the cut logic alone: no timed release between chunks
	pem := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4\n-----END PRIVATE KEY-----\n"
	text := strings.Repeat("filler line\n", 1000) + "key " + secret + " \x1b[31mred\x1b[0m end\n" + pem + strings.Repeat("z", 30000)
	// Chunks of 7 bytes put a border inside the secret and the escapes.
	for i := 0; i < len(text); i += 7 {
		s.add(kernel.Event{Kind: kernel.EventStdout, Data: []byte(text[i:min(i+7, len(text))])})
	}
	s.finish()
	out := got.String()
	if strings.Contains(out, secret[:10]) || strings.Contains(out, "\x1b") || !strings.Contains(out, " red end\n") ||
		strings.Contains(out, "MIIEvQ") || strings.Contains(out, "VJTUt9") {
		t.Fatalf("streamed text leaks: %q", out[11990:min(len(out), 12100)])
	}
	if len(out) > 20000+100 || !strings.Contains(out, "[stream capped") {
		t.Fatalf("streamed %d bytes past the 20000-byte cap", len(out))
	}
}

// A partial line that gets no more bytes is sent after streamPartialAfter,
// cleaned; an open private-key block is not.
func TestStreamerSendsQuietPartialLine(t *testing.T) {
	const secret = "sk-live-0123456789abcdefghij"
	f := envscrub.NewPipeline(envscrub.OutputConfig{InlineCap: 20000}).ForKernel([]string{secret})
	got := make(chan Event, 4)
	s := newStreamer(f, func(e Event) { got <- e })
	s.add(kernel.Event{Kind: kernel.EventStdout, Data: []byte("50% " + secret)})
	s.add(kernel.Event{Kind: kernel.EventStderr, Data: []byte("-----BEGIN PRIVATE KEY-----\nMIIEvQ")})
	select {
	case e := <-got:
		if e.Kind != EventStdout || !strings.HasPrefix(e.Text, "50% ") || strings.Contains(e.Text, secret[:10]) {
			t.Fatalf("partial line sent as %s %q", e.Kind, e.Text)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the quiet partial line was never sent")
	}
	time.Sleep(2 * streamPartialAfter) // the key block's timer fired by now
	select {
	case e := <-got:
		t.Fatalf("an open key block was sent: %s %q", e.Kind, e.Text)
	default:
	}
	s.finish()
	if e := <-got; e.Kind != EventStderr || strings.Contains(e.Text, "MIIEvQ") {
		t.Fatalf("finish sent %s %q", e.Kind, e.Text)
	}
}

func TestStreamedResultDisplaysRedacted(t *testing.T) {
	const secret = "s3cr3t-value-0123456789"
	parent := []string{"PATH=/usr/bin:/bin", "SERVICE_PASSWORD=" + secret}
	scrub, err := envscrub.New(envscrub.Config{Parent: func() []string { return parent }})
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPool(t, func(c *Config) {
		c.Env, c.Output = scrub, envscrubFactory{envscrub.NewPipeline(envscrub.OutputConfig{})}
	})
	var events []Event
	res, err := p.Execute(t.Context(), Request{Code: "class H:\n    def _repr_html_(self): return '<i>" + secret + "</i>'\n" +
		"print('a')\ndisplay(H())", Stream: func(e Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	var html string
	_ = json.Unmarshal(res.Displays[0].Data["text/html"], &html)
	if html != "<i>***</i>" || len(events) != 2 || events[0].Text != "a\n" || events[1].Kind != EventDisplay {
		t.Fatalf("html %q events %+v", html, events)
	}
	_ = json.Unmarshal(events[1].Display.Data["text/html"], &html)
	if html != "<i>***</i>" {
		t.Fatalf("streamed html %q", html)
	}
}

var _ = context.Background

// A secret holding a newline that arrives whole is not cut at its newline.
func TestStreamerKeepsMultilineSecretWhole(t *testing.T) {
	const secret = "first-half-0123456789\nsecond-half-9876543210"
	f := envscrub.NewPipeline(envscrub.OutputConfig{}).ForKernel([]string{secret})
	var got strings.Builder
	s := newStreamer(f, func(e Event) { got.WriteString(e.Text) })
	s.partialAfter = 0
	s.add(kernel.Event{Kind: kernel.EventStdout, Data: []byte("before\npre " + secret + " post")})
	s.add(kernel.Event{Kind: kernel.EventStdout, Data: []byte("\n")})
	s.finish()
	if out := got.String(); strings.Contains(out, "first-half") || strings.Contains(out, "second-half") || !strings.HasPrefix(out, "before\npre ") {
		t.Fatalf("streamed %q", out)
	}
}
