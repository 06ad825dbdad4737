package pool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// TestSparesOfTwoOwnersShareNothing (root, real cgroups, kernel uids, the
// init step): two owners whose first cells run on two spares get two
// different kernel uids, exactly the isolation a cold kernel of the
// profile gets, and neither sees the other's files in /tmp or its tmpdir,
// its environment or its cwd.
func TestSparesOfTwoOwnersShareNothing(t *testing.T) {
	p, state := newRealSparePool(t, 2)
	spares := spareIDs(p, "default")
	cwdA, cwdB := filepath.Join(state, "cwd-a"), filepath.Join(state, "cwd-b")
	for _, d := range []string{cwdA, cwdB} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	a := run(t, p, pool.Request{Owner: "alice", Cwd: cwdA, Code: `import os
open("/tmp/alice-secret", "w").write("a")
open(os.path.join(os.environ["TMPDIR"], "alice-tmp"), "w").write("a")
os.environ["ALICE_ONLY"] = "1"
print(os.getuid(), os.environ["TMPDIR"])`})
	b := run(t, p, pool.Request{Owner: "bob", Cwd: cwdB, Code: `import os
print(os.getuid(), os.path.exists("/tmp/alice-secret"), "ALICE_ONLY" in os.environ, os.getcwd(), "alice-secret" in os.listdir("/tmp"))`})
	wantStatus(t, a, pool.StatusSuccess)
	wantStatus(t, b, pool.StatusSuccess)
	if !slices.Contains(spares, a.Kernel.ID) || !slices.Contains(spares, b.Kernel.ID) || a.Kernel.ID == b.Kernel.ID {
		t.Fatalf("owners ran on %s and %s, spares were %v", a.Kernel.ID, b.Kernel.ID, spares)
	}
	aFields, bFields := strings.Fields(a.Output), strings.Fields(b.Output)
	if len(aFields) != 2 || len(bFields) < 5 {
		t.Fatalf("outputs: %q / %q", a.Output, b.Output)
	}
	uidA, _ := strconv.Atoi(aFields[0])
	uidB, _ := strconv.Atoi(bFields[0])
	if uidA == uidB || uidA < 60000 || uidB < 60000 || a.Kernel.Isolation.UID != uidA || b.Kernel.Isolation.UID != uidB {
		t.Fatalf("uids %d and %d (isolation %d, %d): want two different kernel uids", uidA, uidB, a.Kernel.Isolation.UID, b.Kernel.Isolation.UID)
	}
	if want := fmt.Sprintf("%d False False %s False", uidB, cwdB); strings.TrimSpace(b.Output) != want {
		t.Fatalf("bob sees %q, want %q", strings.TrimSpace(b.Output), want)
	}
	// Bob cannot read alice's tmpdir (another uid's 0700 staging dir).
	res := run(t, p, pool.Request{Owner: "bob", Cwd: cwdB, Code: "import os\ntry:\n    print(os.listdir(" + strconv.Quote(aFields[1]) + "))\nexcept OSError as e:\n    print(type(e).__name__)"})
	if strings.TrimSpace(res.Output) != "PermissionError" && strings.TrimSpace(res.Output) != "FileNotFoundError" {
		t.Fatalf("bob listing alice's tmpdir: %q", res.Output)
	}
	// Fail closed: a spare has exactly the isolation of a cold kernel of
	// the profile (a request with its own limits starts cold).
	cold := run(t, p, pool.Request{Owner: "carol", Code: "1", Limits: pool.Limits{PidsMax: 100}})
	ci, si := *cold.Kernel.Isolation, *a.Kernel.Isolation
	ci.UID, si.UID, ci.PidsMax, si.PidsMax = 0, 0, 0, 0
	if slices.Contains(spares, cold.Kernel.ID) || fmt.Sprint(ci) != fmt.Sprint(si) || len(si.Namespaces) == 0 {
		t.Fatalf("isolation of a spare %+v differs from a cold kernel's %+v", si, ci)
	}
}

// TestSpareCannotSeeCwdStartsCold (root): a cwd the spare's private /tmp
// hides (the daemon's /tmp/...) fails the bind's same-directory check; the
// spare is stopped and the key's kernel starts cold, in that very cwd.
func TestSpareCannotSeeCwdStartsCold(t *testing.T) {
	p, _ := newRealSparePool(t, 1)
	spare := spareIDs(p, "default")[0]
	cwd, err := os.MkdirTemp("/tmp", "kernpool-spare-cwd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(cwd) })
	if err := os.Chmod(cwd, 0o777); err != nil {
		t.Fatal(err)
	}
	res := run(t, p, pool.Request{Owner: "dave", Cwd: cwd, Code: "import os; os.getcwd()"})
	wantStatus(t, res, pool.StatusSuccess)
	if res.Kernel.ID == spare || res.Output != "'"+cwd+"'\n" {
		t.Fatalf("dave: %+v (spare was %s)", res, spare)
	}
	waitSpares(t, p, "default", 1)
	if ids := spareIDs(p, "default"); slices.Contains(ids, spare) {
		t.Fatalf("the spare that failed its bind is offered again: %v", ids)
	}
}

// newRealSparePool is a pool over the real isolator keeping n spares of
// the default mode, and returns once they are ready.
func newRealSparePool(t *testing.T, n int) (*pool.Pool, string) {
	t.Helper()
	iso, state := newRealIsolator(t)
	p := newTestPool(t, func(c *pool.Config) {
		c.StateDir = state
		c.Sandboxes = iso
		c.Warm = map[string]pool.Warm{"default": {Spares: n}}
	})
	waitSpares(t, p, "default", n)
	return p, state
}
