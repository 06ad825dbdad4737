package pool_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// Shell lines and magics run in the kernel's own process tree, so inside
// its sandbox: as the kernel's uid, in its cgroup, without the network
// of a profile that has none, where %pip (download: Debian refuses a
// system-wide install before any network use) fails with pip's own error
// instead of hanging.
func TestShellLinesStayInTheSandbox(t *testing.T) {
	iso, state := newRealIsolator(t)
	p := newTestPool(t, func(c *pool.Config) { c.StateDir = state; c.Sandboxes = iso })
	res := run(t, p, pool.Request{Code: "import importlib.util\nprint(importlib.util.find_spec('IPython') is not None)"})
	if res.Output != "True\n" {
		t.Skip("IPython is not importable by the test interpreter (apt-get install python3-ipython)")
	}
	iso0 := res.Kernel.Isolation
	if iso0 == nil || iso0.UID <= 0 {
		t.Skipf("the kernel runs without its own uid (isolation %+v)", iso0)
	}
	// The kernel has a cgroup namespace rooted at its own group: a shell
	// line in that group sees "/" on every line, one outside it "/..".
	res = run(t, p, pool.Request{Code: "!id -u\n!grep -cv ':/$' /proc/self/cgroup"})
	wantStatus(t, res, pool.StatusSuccess)
	lines := strings.Fields(res.Stdout)
	if len(lines) != 2 || lines[0] != strconv.Itoa(iso0.UID) || lines[1] != "0" {
		t.Fatalf("shell lines ran as %q (kernel uid %d), outside the kernel's cgroup? output %q", lines, iso0.UID, res.Output)
	}
	if iso0.Network {
		t.Logf("the profile keeps the host network: %%pip's offline failure is not checked")
		return
	}
	res = run(t, p, pool.Request{Code: "%pip download --no-cache-dir -d /tmp/dl kernpool-no-such-package\nprint('exit', _exit_code)"})
	wantStatus(t, res, pool.StatusSuccess)
	if !strings.Contains(res.Stdout, "exit 1") || !strings.Contains(res.Stderr, "ERROR:") {
		t.Fatalf("offline %%pip install: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}
