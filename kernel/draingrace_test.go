//go:build unix

package kernel

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that escaped the process-group sandbox (setsid) keeps the
// kernel's pipes open after the kill: teardown waits drainGrace (500 ms)
// for their end before it gives up, so that what the dead tree wrote is
// read. A lower bound, which a loaded host only lengthens.
func TestTeardownWaitsDrainGraceForHeldPipes(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	rep := mustExec(t, k, "import subprocess\np = subprocess.Popen(['/bin/sleep', '1000'], start_new_session=True)\nprint(p.pid)")
	escaped := atoi(t, strings.TrimSpace(rep.Stdout))
	defer func() { _ = syscall.Kill(escaped, syscall.SIGKILL) }()
	start := time.Now()
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Fatalf("teardown took %v with the pipes held open, want at least the 500 ms drain grace", took)
	}
	if !alive(escaped) {
		t.Fatalf("the escaped process %d died: the test needs it to hold the pipes", escaped)
	}
}
