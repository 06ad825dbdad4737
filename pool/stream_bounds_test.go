package pool

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/kernel"
)

// cappedFilter cleans nothing and caps each stream's inline text at n
// bytes (envscrub.Filter's InlineCaps).
type cappedFilter struct{ n int }

func (cappedFilter) Clean(text string) string           { return text }
func (f cappedFilter) InlineCaps() (stdout, stderr int) { return f.n, f.n }

// streamAll feeds chunks to a streamer over f (no timed partial lines),
// finishes it and returns the texts it emitted.
func streamAll(f cleaner, chunks ...string) []string {
	var got []string
	s := newStreamer(f, func(e Event) { got = append(got, e.Text) })
	s.partialAfter = 0
	for _, c := range chunks {
		s.add(kernel.Event{Kind: kernel.EventStdout, Data: []byte(c)})
	}
	s.finish()
	return got
}

// An over-long line (64 KiB held without a newline) is sent but for its
// last 8 KiB, cut on a character boundary; the rest follows at the end.
func TestStreamerSendsOverLongLineButItsWindow(t *testing.T) {
	const held, window = 64 << 10, 8 << 10
	for _, tc := range []struct {
		name, text string
		first      int // bytes of the first event
	}{
		{"ascii", strings.Repeat("x", held+1), held + 1 - window},
		// "é" takes the two bytes around the cut: it goes with the window.
		{"rune at the cut", strings.Repeat("x", held-window) + "é" + strings.Repeat("x", window-1), held - window},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := streamAll(identityFilter{}, tc.text)
			if len(got) != 2 || len(got[0]) != tc.first || got[0]+got[1] != tc.text {
				lens := make([]int, len(got))
				for i, g := range got {
					lens[i] = len(g)
				}
				t.Fatalf("events of %v bytes, want %d then the rest of %d", lens, tc.first, len(tc.text))
			}
		})
	}
}

// A stream's inline cap holds text up to exactly the cap; the first byte
// past it ends the stream with the capped note.
func TestStreamerCapIsInclusive(t *testing.T) {
	const note = "\n[stream capped: the rest is in the result (and its spill file)]\n"
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"exactly the cap", []string{"abcdefghi\n"}, []string{"abcdefghi\n"}},
		{"the cap, then more", []string{"abcdefghi\n", "j\n"}, []string{"abcdefghi\n", note}},
		{"one byte over", []string{"abcdefghij\n"}, []string{"abcdefghij" + note}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := streamAll(cappedFilter{10}, tc.chunks...); !slices.Equal(got, tc.want) {
				t.Fatalf("streamed %q, want %q", got, tc.want)
			}
		})
	}
}

// A JSON display whose masking breaks its syntax (a secret that was a
// number or a bare word) is sent as the masked text in a JSON string,
// never as the unmasked original.
func TestDisplayJSONMaskedEvenWhenMaskingBreaksIt(t *testing.T) {
	f := maskFilter{[]string{"31415926535", "s3cr3t"}}
	for _, tc := range []struct{ raw, want string }{
		{`{"pin": 31415926535}`, `"{\"pin\": [MASKED]}"`},
		{`{"note": "s3cr3t"}`, `{"note": "[MASKED]"}`},
	} {
		d := cleanDisplay(f, Display{Data: map[string]json.RawMessage{"application/json": json.RawMessage(tc.raw)}})
		if got := string(d.Data["application/json"]); got != tc.want {
			t.Errorf("display %s cleaned to %s, want %s", tc.raw, got, tc.want)
		}
	}
}
