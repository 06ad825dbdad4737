package pool

import (
	"reflect"
	"testing"
	"time"
)

// The Results of the interrupted paths that have no kernel's reply to
// word: a spawn killed or abandoned (interruptedResult), a caller gone
// while it waited (waitAbandoned). Clients read ExitCode -1 and Output
// as the reference writes them; the output carries no stray newline.
func TestInterruptedResultsAreWordedExactly(t *testing.T) {
	rq := normalized{key: key{owner: "o", mode: "m"}}
	start := time.Now().Add(-2 * time.Second) // DurationSeconds is about 2
	tests := []struct {
		name string
		got  *Result
		want Result
	}{
		{"spawn canceled", interruptedResult(rq, start, "canceled by the caller", nil, kernelUse{stateReset: true}), Result{
			Status: StatusInterrupted, ExitCode: -1,
			Error:  "Interrupted; the session kernel was killed and its state was lost.",
			Output: "[execution interrupted — canceled by the caller]",
			Kernel: KernelResult{Mode: "m", StateReset: true},
		}},
		{"spawn, no reason", interruptedResult(rq, start, "", nil, kernelUse{reused: true}), Result{
			Status: StatusInterrupted, ExitCode: -1,
			Error:  "Interrupted; the session kernel was killed and its state was lost.",
			Output: "[execution interrupted]",
			Kernel: KernelResult{Mode: "m", Reused: true},
		}},
		{"wait abandoned", waitAbandoned(rq, start), Result{
			Status: StatusInterrupted, ExitCode: -1,
			Error:  "Interrupted while waiting for the session kernel; the cell did not run and the kernel's state is intact.",
			Output: "[execution interrupted]",
			Kernel: KernelResult{Mode: "m", StatePreserved: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Seconds, rounded to ms: about 2, never 0.002 or 2000.
			if d := tt.got.DurationSeconds; d < 2 || d > 600 {
				t.Errorf("DurationSeconds = %v, want 2 s and up", d)
			}
			got := *tt.got
			got.DurationSeconds = 0
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// interrupt puts the cell's stdout before the marker, one newline
// between; with no stdout the output is the marker alone.
func TestInterruptMarkerFollowsStdout(t *testing.T) {
	tests := []struct{ stdout, why, want string }{
		{"", "killed", "[execution interrupted — killed]"},
		{"partial\n", "killed", "partial\n\n[execution interrupted — killed]"},
		{"partial", "", "partial\n[execution interrupted]"},
	}
	for _, tt := range tests {
		res := &Result{Status: StatusSuccess}
		interrupt(res, tt.stdout, tt.why)
		if res.Output != tt.want || res.ExitCode != -1 || res.Status != StatusInterrupted {
			t.Errorf("interrupt(%q, %q): output %q, exit %d, status %s; want %q, -1, interrupted",
				tt.stdout, tt.why, res.Output, res.ExitCode, res.Status, tt.want)
		}
	}
}

// An OOM kill with no known memory limit (0: the host's OOM killer, or a
// mode without a memory cap) names no limit; a known one is named.
func TestOOMMessageNamesOnlyAKnownLimit(t *testing.T) {
	const tail = "its state was lost. The next call starts a fresh kernel."
	tests := []struct {
		limit int64
		want  string
	}{
		{0, "The session kernel was killed by the out-of-memory killer; " + tail},
		{-1, "The session kernel was killed by the out-of-memory killer; " + tail},
		{1, "The session kernel was killed by the out-of-memory killer at its memory limit of 1B; " + tail},
		{256 << 20, "The session kernel was killed by the out-of-memory killer at its memory limit of 256MiB; " + tail},
	}
	for _, tt := range tests {
		if got := oomMessage(tt.limit); got != tt.want {
			t.Errorf("oomMessage(%d) = %q, want %q", tt.limit, got, tt.want)
		}
	}
}

// Durations reach clients in seconds rounded to the millisecond.
func TestSecondsRoundsToMilliseconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want float64
	}{
		{1234567 * time.Microsecond, 1.235},
		{1234499 * time.Microsecond, 1.234},
		{90 * time.Second, 90},
		{400 * time.Microsecond, 0},
		{0, 0},
	}
	for _, tt := range tests {
		if got := seconds(tt.d); got != tt.want {
			t.Errorf("seconds(%v) = %v, want %v", tt.d, got, tt.want)
		}
	}
}
