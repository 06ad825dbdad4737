//go:build integration && linux

package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestSparesAcrossTenants: a daemon with two warm spares (real sandboxes)
// runs two new owners' first cells on them, as two different kernel uids
// that see nothing of each other; the pool refills; and when the daemon
// stops, nothing of any spare, claimed or not, is left (the harness's
// cleanup checks processes, cgroups, staging dirs and uid locks).
func TestSparesAcrossTenants(t *testing.T) {
	d := StartDaemon(t, Opts{Spares: 2})
	spares := waitSpareIDs(t, d, 2, nil)
	a := d.Run(t, "alice", "import os\nopen('/tmp/alice', 'w').write('a')\nos.environ['ALICE'] = '1'\nos.getuid()")
	b := d.Run(t, "bob", "import os\n(os.getuid(), os.path.exists('/tmp/alice'), 'ALICE' in os.environ)")
	if a.Status != "success" || b.Status != "success" {
		t.Fatalf("cells: %+v / %+v", a, b)
	}
	if !slices.Contains(spares, a.Kernel.ID) || !slices.Contains(spares, b.Kernel.ID) || a.Kernel.ID == b.Kernel.ID {
		t.Fatalf("owners ran on %s and %s; the spares were %v", a.Kernel.ID, b.Kernel.ID, spares)
	}
	if a.Kernel.Isolation == nil || b.Kernel.Isolation == nil || a.Kernel.Isolation.UID == b.Kernel.Isolation.UID {
		t.Fatalf("isolation: %+v / %+v", a.Kernel.Isolation, b.Kernel.Isolation)
	}
	if !strings.HasSuffix(b.Output, ", False, False)\n") {
		t.Fatalf("bob sees alice: %q", b.Output)
	}
	// Refilled with new kernels; the claimed ones are never spares again.
	for _, id := range waitSpareIDs(t, d, 2, spares) {
		if id == a.Kernel.ID || id == b.Kernel.ID {
			t.Fatalf("claimed kernel %s is a spare again", id)
		}
	}
}

// waitSpareIDs polls the kernel list (the daemon is another process) until
// it shows n spares none of which is in old, and returns their ids.
func waitSpareIDs(t *testing.T, d *Daemon, n int, old []string) []string {
	t.Helper()
	deadline := time.Now().Add(scaled(testenv.Patience))
	for {
		list, err := d.API().Kernels(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range list {
			if k.Spare && !slices.Contains(old, k.ID) {
				ids = append(ids, k.ID)
			}
		}
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d new spares listed within 30s, want %d: %+v", len(ids), n, list)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
