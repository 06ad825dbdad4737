package pool_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
)

// The streamer masks a secret cut across two chunks, strips ANSI across
// them, and sends no more than the inline cap.
func TestStreamerRedactsAcrossChunks(t *testing.T) {
	const secret = "sk-live-0123456789abcdefghij"
	f := envscrub.NewPipeline(envscrub.OutputConfig{InlineCap: 20000}).ForKernel([]string{secret})
	var mu sync.Mutex
	var got strings.Builder
	// The cut logic alone: no timed release between chunks.
	s := pool.NewStreamer(f, func(e pool.Event) { mu.Lock(); got.WriteString(e.Text); mu.Unlock() }, 0)
	pem := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4\n-----END PRIVATE KEY-----\n"
	text := strings.Repeat("filler line\n", 1000) + "key " + secret + " \x1b[31mred\x1b[0m end\n" + pem + strings.Repeat("z", 30000)
	// Chunks of 7 bytes put a border inside the secret and the escapes.
	for i := 0; i < len(text); i += 7 {
		s.Add(kernel.Event{Kind: kernel.EventStdout, Data: []byte(text[i:min(i+7, len(text))])})
	}
	s.Finish()
	out := got.String()
	if strings.Contains(out, secret[:10]) || strings.Contains(out, "\x1b") || !strings.Contains(out, " red end\n") ||
		strings.Contains(out, "MIIEvQ") || strings.Contains(out, "VJTUt9") {
		t.Fatalf("streamed text leaks: %q", out[11990:min(len(out), 12100)])
	}
	if len(out) > 20000+100 || !strings.Contains(out, "[stream capped") {
		t.Fatalf("streamed %d bytes past the 20000-byte cap", len(out))
	}
}

// A partial line that gets no more bytes is sent after pool.StreamPartialAfter,
// cleaned; an open private-key block is not. In a bubble (testing/synctest)
// the streamer's timers run on the bubble's clock: each fires as soon as
// the test waits, so the key block's timer has surely fired after the
// sleep, and the wait bound costs nothing when a line never comes.
func TestStreamerSendsQuietPartialLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const secret = "sk-live-0123456789abcdefghij"
		f := envscrub.NewPipeline(envscrub.OutputConfig{InlineCap: 20000}).ForKernel([]string{secret})
		got := make(chan pool.Event, 4)
		s := pool.NewStreamer(f, func(e pool.Event) { got <- e }, pool.StreamPartialAfter)
		s.Add(kernel.Event{Kind: kernel.EventStdout, Data: []byte("50% " + secret)})
		s.Add(kernel.Event{Kind: kernel.EventStderr, Data: []byte("-----BEGIN PRIVATE KEY-----\nMIIEvQ")})
		select {
		case e := <-got:
			if e.Kind != pool.EventStdout || !strings.HasPrefix(e.Text, "50% ") || strings.Contains(e.Text, secret[:10]) {
				t.Fatalf("partial line sent as %s %q", e.Kind, e.Text)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("the quiet partial line was never sent")
		}
		time.Sleep(2 * pool.StreamPartialAfter) // the bubble's clock: the key block's timer fired
		select {
		case e := <-got:
			t.Fatalf("an open key block was sent: %s %q", e.Kind, e.Text)
		default:
		}
		s.Finish()
		if e := <-got; e.Kind != pool.EventStderr || strings.Contains(e.Text, "MIIEvQ") {
			t.Fatalf("finish sent %s %q", e.Kind, e.Text)
		}
	})
}

// scrubbedPool is a pool whose kernels get the daemon's secret from
// secretEnv (NAME=value) and whose output is redacted as the daemon's is.
func scrubbedPool(t *testing.T, secretEnv string) *pool.Pool {
	t.Helper()
	parent := []string{"PATH=/usr/bin:/bin", secretEnv}
	scrub, err := envscrub.New(envscrub.Config{Parent: func() []string { return parent }})
	if err != nil {
		t.Fatal(err)
	}
	return newTestPool(t, func(c *pool.Config) {
		c.Env, c.Output = scrub, envscrub.NewPipeline(envscrub.OutputConfig{})
	})
}

func TestStreamedResultDisplaysRedacted(t *testing.T) {
	const secret = "s3cr3t-value-0123456789"
	p := scrubbedPool(t, "SERVICE_PASSWORD="+secret)
	var events []pool.Event
	res, err := p.Execute(t.Context(), pool.Request{Code: "class H:\n    def _repr_html_(self): return '<i>" + secret + "</i>'\n" +
		"print('a')\ndisplay(H())", Stream: func(e pool.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	var html string
	_ = json.Unmarshal(res.Displays[0].Data["text/html"], &html)
	if html != "<i>***</i>" || len(events) != 2 || events[0].Text != "a\n" || events[1].Kind != pool.EventDisplay {
		t.Fatalf("html %q events %+v", html, events)
	}
	_ = json.Unmarshal(events[1].Display.Data["text/html"], &html)
	if html != "<i>***</i>" {
		t.Fatalf("streamed html %q", html)
	}
}

// A secret holding a newline that arrives whole is not cut at its newline.
func TestStreamerKeepsMultilineSecretWhole(t *testing.T) {
	const secret = "first-half-0123456789\nsecond-half-9876543210"
	f := envscrub.NewPipeline(envscrub.OutputConfig{}).ForKernel([]string{secret})
	var got strings.Builder
	s := pool.NewStreamer(f, func(e pool.Event) { got.WriteString(e.Text) }, 0)
	s.Add(kernel.Event{Kind: kernel.EventStdout, Data: []byte("before\npre " + secret + " post")})
	s.Add(kernel.Event{Kind: kernel.EventStdout, Data: []byte("\n")})
	s.Finish()
	if out := got.String(); strings.Contains(out, "first-half") || strings.Contains(out, "second-half") || !strings.HasPrefix(out, "before\npre ") {
		t.Fatalf("streamed %q", out)
	}
}

// TestDisplayMetadataRedacted: a display's metadata is the cell's too,
// and is masked as its data is, in the result and in the streamed event.
func TestDisplayMetadataRedacted(t *testing.T) {
	const secret = "s3cr3t-value-0123456789"
	p := scrubbedPool(t, "SERVICE_PASSWORD="+secret)
	var streamed []pool.Display
	res, err := p.Execute(t.Context(), pool.Request{
		Code: "display(1, metadata={'note': '" + secret + "', 'text/plain': {'alt': '" + secret + "'}})",
		Stream: func(e pool.Event) {
			if e.Kind == pool.EventDisplay {
				streamed = append(streamed, *e.Display)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Displays) != 1 || len(streamed) != 1 {
		t.Fatalf("displays %+v, streamed %+v", res.Displays, streamed)
	}
	for where, d := range map[string]pool.Display{"result": res.Displays[0], "stream": streamed[0]} {
		meta, _ := json.Marshal(d.Metadata)
		if strings.Contains(string(meta), secret) || !strings.Contains(string(meta), `"note":"***"`) || !strings.Contains(string(meta), `{"alt":"***"}`) {
			t.Errorf("%s: display metadata %s", where, meta)
		}
	}
}
