package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestUIDPoolTaintedUIDKeepsItsLock: a tainted uid's host-wide lock stays
// held, so no other daemon leases a uid whose processes may linger, and is
// given back when the uid is revived, so its pool can lease it again.
func TestUIDPoolTaintedUIDKeepsItsLock(t *testing.T) {
	dir := testTempDir(t)
	a, b := newUIDPool(100, 100, false, dir, nil), newUIDPool(100, 100, false, dir, nil)
	u, err := a.acquire("x")
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("uid leases need uid locks, which %s lacks: %v", runtime.GOOS, err)
	}
	if err != nil || u != 100 {
		t.Fatalf("acquire: %d, %v; want 100", u, err)
	}
	a.taint(u)
	if got, err := b.acquire("y"); !errors.Is(err, ErrNoUID) {
		t.Fatalf("another pool leased tainted uid %d (%v); want ErrNoUID", got, err)
	}
	a.busy = func(int) bool { return false }
	if got, err := a.acquire("z"); err != nil || got != 100 {
		t.Fatalf("acquire once the tainted uid is clean: %d, %v; want 100", got, err)
	}
}

// TestUIDPoolRefusalIsMinusOne: a refused acquire returns uid -1 with its
// error, never a uid (1 is a host account).
func TestUIDPoolRefusalIsMinusOne(t *testing.T) {
	file := filepath.Join(testTempDir(t), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	full := newUIDPool(100, 100, false, "", nil)
	if _, err := full.acquire("x"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		p    *uidPool
	}{
		{"range exhausted", full},
		{"lock dir unusable", newUIDPool(100, 100, false, filepath.Join(file, "locks"), nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if u, err := c.p.acquire("y"); err == nil || u != -1 {
				t.Fatalf("acquire: %d, %v; want -1 and an error", u, err)
			}
		})
	}
}
