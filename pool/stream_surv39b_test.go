package pool

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/kernel"
)

// A partial line is held up to 64 KiB (streamMaxHold) inclusive, counted
// from the last newline: the complete lines before it go at once, the
// partial line at the end.
func TestStreamerHoldsPartialLineUpToTheBound(t *testing.T) {
	const held = 64 << 10
	lines := strings.Repeat("a", 40959) + "\n" // 40 KiB of complete lines
	for _, tc := range []struct {
		name string
		text string
		want []string
	}{
		{"a line of exactly 64 KiB", strings.Repeat("x", held), []string{strings.Repeat("x", held)}},
		{"lines, then 30000 bytes of a line", lines + strings.Repeat("b", 30000), []string{lines, strings.Repeat("b", 30000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := streamAll(identityFilter{}, tc.text); !slices.Equal(got, tc.want) {
				t.Fatalf("events of %v bytes, want %v", lens(got), lens(tc.want))
			}
		})
	}
}

func lens(texts []string) []int {
	out := make([]int, len(texts))
	for i, s := range texts {
		out[i] = len(s)
	}
	return out
}

// lenFilter prefixes a text with its length, so that cleaning the held
// lines alone never gives a prefix of cleaning them with what follows:
// a stream where something always seems to cross the cut.
type lenFilter struct{}

func (lenFilter) Clean(text string) string { return strconv.Itoa(len(text)) + ":" + text }

// Complete lines that seem to run into what follows are held while the
// stream holds up to 256 KiB (4 * streamMaxHold), and sent at the first
// byte past it.
func TestStreamerHoldsCrossingLinesUpTo256KiB(t *testing.T) {
	const bound = 4 * (64 << 10)
	var got []string
	s := newStreamer(lenFilter{}, func(e Event) { got = append(got, e.Text) })
	s.partialAfter = 0
	lines := strings.Repeat(strings.Repeat("x", 1023)+"\n", 255) // 261120 bytes
	add := func(text string) {
		s.add(kernel.Event{Kind: kernel.EventStdout, Data: []byte(text)})
	}
	add(lines + strings.Repeat("y", bound-len(lines)-1))
	add("z") // exactly 256 KiB held
	if len(got) != 0 {
		t.Fatalf("at 256 KiB held, %d events of %v bytes were sent, want none", len(got), lens(got))
	}
	add("w")
	if want := "261120:" + lines; len(got) != 1 || got[0] != want {
		t.Fatalf("one byte past 256 KiB: events of %v bytes, want the %d bytes of the lines", lens(got), len(want))
	}
	s.finish()
}

// The inline cap cuts on a character boundary, back to the rune's
// start, and never before the text's first byte (bytes that start no
// rune, which a filter without cleaning passes on, included).
func TestStreamerCapCutsOnRuneStart(t *testing.T) {
	const note = "\n[stream capped: the rest is in the result (and its spill file)]\n"
	for _, tc := range []struct {
		name string
		cap  int
		text string
		want []string
	}{
		{"cap inside a 2-byte rune", 10, "abcdefghié\n", []string{"abcdefghi" + note}},
		{"cap inside a 3-byte rune", 10, "abcdefgh€\n", []string{"abcdefgh" + note}},
		{"no rune start before the cap", 2, "\x80\x80\x80\n", []string{note}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := streamAll(cappedFilter{tc.cap}, tc.text); !slices.Equal(got, tc.want) {
				t.Fatalf("streamed %q, want %q", got, tc.want)
			}
		})
	}
}

// The kernel sends display data as ASCII JSON (json.dumps escapes every
// non-ASCII character): text types (svg included) are masked decoded, so
// a secret JSON spells with \u escapes is still found; binary types
// (png) are base64 kept byte for byte, whatever their letters spell.
func TestDisplayTextMaskedDecodedBinaryKept(t *testing.T) {
	f := maskFilter{[]string{"pässwört", "0KGgo"}}
	for _, tc := range []struct{ mime, raw, want string }{
		{"text/plain", `"key p\u00e4ssw\u00f6rt"`, "key [MASKED]"},
		{"image/svg+xml", `"<svg>p\u00e4ssw\u00f6rt</svg>"`, "<svg>[MASKED]</svg>"},
		{"image/png", `"iVBORw0KGgoAAAANSUhEUg=="`, "iVBORw0KGgoAAAANSUhEUg=="},
	} {
		d := cleanDisplay(f, Display{Data: map[string]json.RawMessage{tc.mime: json.RawMessage(tc.raw)}})
		var got string
		if err := json.Unmarshal(d.Data[tc.mime], &got); err != nil || got != tc.want {
			t.Errorf("%s %s cleaned to %s (%v), want %q", tc.mime, tc.raw, d.Data[tc.mime], err, tc.want)
		}
	}
}

// A secret holding a newline is held whole even when its first line is
// longer than the window the cut check cleans: the check starts at that
// line's start.
func TestStreamerHoldsLongMultilineSecret(t *testing.T) {
	secret := strings.Repeat("k", 9000) + "\nTAIL-0123456789"
	got := streamAll(maskFilter{[]string{secret}}, "pre "+secret+" post")
	if want := []string{"pre [MASKED] post"}; !slices.Equal(got, want) {
		t.Fatalf("streamed events of %v bytes, want %q", lens(got), want)
	}
}
