package pool_test

import (
	"strings"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/pool"
)

// TestSpareBoundLikeACold: the key's cwd, passthrough and environment a
// bound spare shows its first cell are a cold kernel's, item for item.
func TestSpareBoundLikeACold(t *testing.T) {
	parent := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SPARE_PASS=passed-value", "API_TOKEN=hidden-0123456789"}
	scrub, err := envscrub.New(envscrub.Config{Parent: func() []string { return parent }})
	if err != nil {
		t.Fatal(err)
	}
	cwd := testTempDir(t)
	probe := pool.Request{Cwd: cwd, Passthrough: []string{"SPARE_PASS"}, Code: `import os, sys, json
env = {k: v for k, v in os.environ.items() if k not in ("KERNPOOL_KERNEL_ID", "TMPDIR", "TMP", "TEMP", "PYTHONPATH", "MPLCONFIGDIR")}
print(json.dumps([os.getcwd(), env, sys.path[2:], os.environ["TMPDIR"].endswith("/tmp")], sort_keys=True))`}
	cold := newTestPool(t, func(c *pool.Config) { c.Env = scrub })
	warm := newTestPool(t, withWarm(map[string]pool.Warm{"default": {Spares: 1}}), func(c *pool.Config) { c.Env = scrub })
	waitSpares(t, warm, "default", 1)
	spare := spareIDs(warm, "default")
	a, b := run(t, cold, probe), run(t, warm, probe)
	wantStatus(t, a, pool.StatusSuccess)
	wantStatus(t, b, pool.StatusSuccess)
	if b.Kernel.ID != spare[0] {
		t.Fatalf("warm pool ran the probe on %s, not its spare %s", b.Kernel.ID, spare[0])
	}
	if !strings.Contains(a.Output, "passed-value") || !strings.Contains(a.Output, cwd) {
		t.Fatalf("cold probe lacks the passthrough or cwd: %s", a.Output)
	}
	if a.Output != b.Output {
		t.Fatalf("a bound spare differs from a cold kernel:\ncold  %s\nspare %s", a.Output, b.Output)
	}
}
