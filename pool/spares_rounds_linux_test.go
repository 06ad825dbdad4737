package pool_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/pool"
)

// TestSparesExhaustedAndRefilledManyRounds (root, real kernels): 18
// rounds of taking every warm spare by starting owners on them and giving
// the kernels back (shutting the owner down, killing the kernel by id, or
// the kernel dying in a cell), each round ending with the pool back at
// its configured spares and nothing else: no owner kernel listed, one
// cgroup per live kernel and one held uid lock per live kernel. The uid
// range holds one uid more than a round needs, so a uid kept by any
// release runs the refill dry within two rounds, as MaxKernels (a round's
// peak) does for a slot kept.
func TestSparesExhaustedAndRefilledManyRounds(t *testing.T) {
	const spares, rounds, firstUID = 2, 18, 61940
	lockDir := filepath.Join(t.TempDir(), "uids")
	iso, state := newRealIsolatorWith(t, func(c *isolate.Config) {
		// 2 owners' kernels and 2 refilled spares live at once, plus one.
		c.UIDRange = [2]int{firstUID, firstUID + 2*spares}
		c.UIDLockDir = lockDir
	})
	p := newTestPool(t, func(c *pool.Config) {
		c.StateDir = state
		c.Sandboxes = iso
		c.Warm = map[string]pool.Warm{"default": {Spares: spares}}
		// Room for exactly a round's peak: a slot kept by any release
		// leaves the refill no room.
		c.MaxKernels = 2 * spares
	})
	waitSpares(t, p, "default", spares)
	checkOnlySpares(t, p, iso, lockDir, spares, -1)
	for round := range rounds {
		before := p.Stats()
		var ids []string
		var owners []string
		for i := range spares {
			owner := fmt.Sprintf("r%d-o%d", round, i)
			res := run(t, p, pool.Request{Owner: owner, Code: "import os; os.getuid()"})
			wantStatus(t, res, pool.StatusSuccess)
			if uid, _ := strconv.Atoi(strings.TrimSpace(res.Output)); uid < firstUID || uid > firstUID+2*spares || slices.Contains(ids, res.Kernel.ID) {
				t.Fatalf("round %d: owner %s on kernel %s, uid %q (earlier kernels %v)", round, owner, res.Kernel.ID, res.Output, ids)
			}
			ids, owners = append(ids, res.Kernel.ID), append(owners, owner)
		}
		st := p.Stats()
		// A claimed spare counts as a kernel started; a cold start only there.
		if claimed, started := st.SparesClaimed-before.SparesClaimed, st.KernelsStarted-before.KernelsStarted; claimed != spares || started != spares {
			t.Fatalf("round %d: %d spares claimed and %d kernels started for %d new owners; want every owner on a spare", round, claimed, started, spares)
		}
		for i, id := range ids {
			switch round % 3 {
			case 0:
				if n := p.ShutdownOwner(owners[i]); n != 1 {
					t.Fatalf("round %d: ShutdownOwner(%s) = %d, want 1", round, owners[i], n)
				}
			case 1:
				if err := p.Kill(id); err != nil {
					t.Fatalf("round %d: Kill(%s): %v", round, id, err)
				}
			case 2:
				res, err := p.Execute(t.Context(), pool.Request{Owner: owners[i], Code: "import os; os._exit(3)"})
				if err != nil || res.Status != pool.StatusError {
					t.Fatalf("round %d: a cell ending its kernel: %+v, %v", round, res, err)
				}
			}
		}
		// The kernel that died in its cell is torn down by the pool
		// after the reply: wait for the event (it is no longer listed).
		waitFor(t, "the owners' kernels to be gone", func() bool {
			return !slices.ContainsFunc(p.List(), func(k pool.KernelInfo) bool { return !k.Spare })
		})
		waitSpares(t, p, "default", spares)
		checkOnlySpares(t, p, iso, lockDir, spares, round)
	}
	if st := p.Stats(); st.SparesClaimed != spares*rounds || st.SparesStarted != spares*(rounds+1) || st.KernelsStarted != spares*rounds {
		t.Fatalf("after %d rounds: %d spares claimed, %d spares started, %d kernels started; want %d, %d, %d", rounds, st.SparesClaimed, st.SparesStarted, st.KernelsStarted, spares*rounds, spares*(rounds+1), spares*rounds)
	}
}

// checkOnlySpares fails unless exactly n kernels live, all of them ready
// spares, each with a cgroup of its own in every pool parent and no other
// group there, and exactly their uids' locks held.
func checkOnlySpares(t *testing.T, p *pool.Pool, iso *isolate.Isolator, lockDir string, n, round int) {
	t.Helper()
	var ids []string
	var uids []int
	for _, k := range p.List() {
		if !k.Spare || k.Owner != "" {
			t.Fatalf("round %d: a kernel other than a spare is listed: %+v", round, k)
		}
		ids, uids = append(ids, k.ID), append(uids, k.UID)
	}
	if len(ids) != n || p.Stats().Spares != n {
		t.Fatalf("round %d: %d spares listed (%v), stats say %d; want %d", round, len(ids), ids, p.Stats().Spares, n)
	}
	slices.Sort(ids)
	for _, parent := range iso.Report().Parents {
		groups := subdirs(t, parent)
		if strings.Contains(parent, "/freezer/") {
			// A pool that kills through the v1 freezer keeps its own empty
			// group freezer-pin there (cgroup/doc.go): no kernel's.
			groups = slices.DeleteFunc(groups, func(g string) bool { return g == "freezer-pin" })
		}
		if !slices.Equal(groups, ids) {
			t.Fatalf("round %d: groups under %s are %v, want the spares' %v", round, parent, groups, ids)
		}
	}
	slices.Sort(uids)
	if held := heldUIDLocks(t, lockDir); !slices.Equal(held, uids) || len(slices.Compact(slices.Clone(uids))) != n {
		t.Fatalf("round %d: uid locks held %v, want the spares' distinct uids %v", round, held, uids)
	}
}

func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// heldUIDLocks lists the uids whose lock file in dir someone holds: a
// flock from another open file is refused (EWOULDBLOCK) while it is held.
func heldUIDLocks(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var held []int
	for _, e := range ents {
		uid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".lock"))
		if err != nil || !strings.HasSuffix(e.Name(), ".lock") {
			t.Fatalf("unexpected entry %s in the uid lock dir", e.Name())
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		_ = f.Close() // also drops the lock if it was taken
		switch {
		case errors.Is(err, unix.EWOULDBLOCK):
			held = append(held, uid)
		case err != nil:
			t.Fatal(err)
		}
	}
	slices.Sort(held)
	return held
}
