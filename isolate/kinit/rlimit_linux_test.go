package kinit

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRlimitNamesResolve: every name the daemon accepts in a config is one
// the init can set, with the resource setrlimit(2) documents for it.
func TestRlimitNamesResolve(t *testing.T) {
	want := map[string]int{
		"core": unix.RLIMIT_CORE, "nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC,
		"fsize": unix.RLIMIT_FSIZE, "as": unix.RLIMIT_AS, "data": unix.RLIMIT_DATA,
		"stack": unix.RLIMIT_STACK, "cpu": unix.RLIMIT_CPU, "memlock": unix.RLIMIT_MEMLOCK,
	}
	names := RlimitNames()
	if len(names) != len(want) {
		t.Fatalf("%d names, want %d: %v", len(names), len(want), names)
	}
	for _, n := range names {
		got, ok := rlimitResource(n)
		if !ok || got != want[n] {
			t.Errorf("rlimitResource(%q) = %d, %v; want %d", n, got, ok, want[n])
		}
	}
	if _, ok := rlimitResource("rss"); ok {
		t.Error("rlimitResource accepted an unknown name")
	}
}
