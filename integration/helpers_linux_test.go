//go:build integration && linux

package integration

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// capped are the limits of the escape and tenant daemons.
func capped() Opts { return Opts{MemoryMax: "64MiB", PidsMax: 64, CPUMax: "1"} }

// assertServes proves the daemon still answers cells for owner after an
// attack: a fresh or surviving kernel computes 6*7.
func assertServes(t *testing.T, d *Daemon, owner string) {
	t.Helper()
	if !d.Alive() {
		t.Fatalf("the daemon died; log:\n%s", d.LogTail(30))
	}
	res := d.Run(t, owner, "print(6*7)")
	if res.Status != "success" || strings.TrimSpace(res.Output) != "42" {
		t.Fatalf("follow-up cell: status %q output %q error %q", res.Status, res.Output, res.Error)
	}
}

// shutdownAndCheck disposes owners' kernels and asserts nothing is left.
func shutdownAndCheck(t *testing.T, d *Daemon, owners ...string) {
	t.Helper()
	d.Live(t)
	for _, o := range owners {
		if err := d.API().Shutdown(context.Background(), o); err != nil {
			t.Errorf("shutdown %s: %v", o, err)
		}
	}
	d.AssertClean(t)
}

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	p := readProc(pid)
	return p.ok && p.state != "Z" && p.state != "X"
}

// firstInt parses the first integer on the last line that has one.
func lastInt(s string) int {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if n, err := strconv.Atoi(strings.TrimSpace(lines[i])); err == nil {
			return n
		}
	}
	return 0
}

// envDuration reads a duration knob, e.g. KERNPOOL_DEATH_DEADLINE=3s.
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envInt reads an integer knob.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// countProcs counts the live processes of this daemon's kernels.
func countProcs(d *Daemon) int {
	l := d.scan(false)
	n := 0
	for _, pid := range l.pids {
		if pidAlive(pid) {
			n++
		}
	}
	return n
}

// waitFor polls cond every 50 ms until it holds, failing t after bound.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(bound); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
	}
}
