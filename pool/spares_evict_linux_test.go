package pool

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// dirEnv is an EnvBuilder putting dir on every kernel's PYTHONPATH.
type dirEnv string

func (d dirEnv) Build(string, []string) ([]string, []string, error) {
	return []string{"PATH=/usr/bin:/bin", "PYTHONPATH=" + string(d)}, nil, nil
}

// blockingPreload writes a module that, imported, says "started" on a
// FIFO and sleeps for an hour. It returns the module's dir and the FIFO's
// lines, closed once the kernel that holds it open is gone.
func blockingPreload(t *testing.T, name string) (string, <-chan string) {
	t.Helper()
	dir := testTempDir(t)
	fifo := filepath.Join(dir, "events")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`import time
_f = open(%q, "w", buffering=1)
_f.write("started\n")
time.sleep(3600)
`, fifo)
	if err := os.WriteFile(filepath.Join(dir, name+".py"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	go func() {
		defer close(lines)
		f, err := os.Open(fifo) // blocks until the module opens it
		if err != nil {
			return
		}
		defer f.Close()
		for sc := bufio.NewScanner(f); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		// A module never imported leaves the reader blocked in its open:
		// a writer's open and close ends it. That open fails (ENXIO)
		// until the reader is in its own, which a test that ends early
		// (a skip, a failure) can come before: so wait for one or the
		// other.
		testenv.WaitFor(t, "the FIFO's reader to open it or end", func() bool {
			select {
			case _, more := <-lines: // drained below anyway
				if !more {
					return true
				}
			default:
			}
			f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err == nil {
				_ = f.Close()
			}
			return !errors.Is(err, syscall.ENXIO)
		})
		for range lines {
		}
	})
	return dir, lines
}

// nextLine waits for the FIFO's next line ("EOF" once it closed).
func nextLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	select {
	case got, ok := <-lines:
		if !ok {
			got = "EOF"
		}
		if got != want {
			t.Fatalf("the spare's preload said %q, want %q", got, want)
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("the spare's preload did not say %q within %v", want, testenv.Patience)
	}
}

// TestStartingSpareEvictedIsCancelled: at MaxKernels, an owner's new
// kernel takes the room of the spare still starting, and that start is
// cancelled at once (its kernel gone), not left to run until the preload
// ends by itself an hour later.
func TestStartingSpareEvictedIsCancelled(t *testing.T) {
	dir, lines := blockingPreload(t, "kp_spare_blocker")
	p := newTestPool(t, func(c *Config) {
		c.MaxKernels = 1
		c.Env = dirEnv(dir)
		c.Warm = map[string]Warm{"slow": {Spares: 1, Preload: []string{"kp_spare_blocker"}}}
	})
	nextLine(t, lines, "started") // the spare is starting: the pool is full
	// The eviction (under the pool's lock, before alice's kernel starts)
	// cancels the start: seen at once once alice's cell is done, the
	// kernel's end (EOF below) following.
	var cancelled atomic.Bool
	p.mu.Lock()
	st := p.sp.starting
	if st == nil || st.cancel == nil {
		p.mu.Unlock()
		t.Fatal("no spare start to cancel while its preload runs")
	}
	cancel := st.cancel
	st.cancel = func() { cancelled.Store(true); cancel() }
	p.mu.Unlock()
	res := run(t, p, Request{Owner: "alice", Code: "40 + 2"})
	if !cancelled.Load() {
		t.Fatal("the evicted spare's start was not cancelled")
	}
	wantStatus(t, res, StatusSuccess)
	if res.Output != "42\n" {
		t.Fatalf("owner's cell printed %q", res.Output)
	}
	if st := p.Stats(); st.SparesEvicted != 1 || st.SparesStarted != 0 || st.Evicted != 0 {
		t.Fatalf("stats = %+v, want the one starting spare evicted", st)
	}
	nextLine(t, lines, "EOF")
}
