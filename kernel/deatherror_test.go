package kernel

import (
	"errors"
	"testing"
)

// A runner whose wait status is unknown (Wait failed: no ProcessState)
// died of an unknown cause: ExitCode -1, as for a signal, never 0 or 1
// (an exit the runner did not make), and Signal says why it is unknown.
func TestDeathErrorOfAnUnknownWaitStatus(t *testing.T) {
	d := deathError(nil, errors.New("wait: no child"), Verdict{OOMKilled: true, MemoryLimit: 1 << 30}, "last words")
	want := DeathError{ExitCode: -1, Signal: "unknown (wait: no child)", OOMKilled: true, MemoryLimit: 1 << 30, Stderr: "last words"}
	if *d != want {
		t.Fatalf("deathError = %+v, want %+v", *d, want)
	}
}
