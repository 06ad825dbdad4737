package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// A repr that ends its kernel during a listing, on the kernel's endpoint
// or the session's: os._exit, or allocating past the kernel's memory
// limit (a real memory cgroup: the OOM killer). Either is answered 409
// kernel_died (pool.ErrKernelDied) with a message saying how the kernel
// ended, is counted in the pool's stats as a cell's death is (died, and
// oom_killed for the OOM killer), is not logged as a failure of the
// daemon, and the owner's next cell runs on a new kernel (no state_reset,
// as after a cell's death: the 409 told the loss).
func TestVariablesKernelDied(t *testing.T) {
	const oomRepr = "  b = bytearray(256 << 20)\n  for i in range(0, len(b), 4096): b[i] = 1\n  return 'big'\n"
	for _, tc := range []struct {
		name    string
		repr    string // the body of __repr__
		session bool
		oom     bool // under a real sandbox with a 64 MiB limit
		want    []string
	}{
		{"exit by id", "  import os; os._exit(3)\n", false, false, []string{"the kernel died during the listing", "the kernel exited with code 3"}},
		{"exit by session", "  import os; os._exit(3)\n", true, false, []string{"the kernel died during the listing", "the kernel exited with code 3"}},
		{"oom by id", oomRepr, false, true, []string{"ran the kernel out of memory", "killed by the out-of-memory killer at its memory limit of 64MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.SyncBuffer
			o := daemonOpts{server: func(c *api.ServerConfig) {
				c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
			}}
			var lim pool.Limits
			if tc.oom {
				lim = pool.Limits{MemoryMax: 64 << 20}
				o.pool = realSandbox(t)
			}
			d := startDaemon(t, o)
			ctx, c := testCtx(t), d.client
			req := pool.Request{Owner: "v", Limits: lim, Code: "class A:\n def __repr__(self):\n" + tc.repr + "a = A()"}
			if tc.session {
				s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "v"})
				if err != nil {
					t.Fatal(err)
				}
				req.Owner, req.Session = "", s.ID
			}
			res, err := c.Execute(ctx, req)
			if err != nil || res.Status != pool.StatusSuccess {
				t.Fatalf("execute: %+v, %v", res, err)
			}
			kid := res.Kernel.ID
			before := d.pool.Stats()
			if tc.session {
				_, err = c.SessionVariables(ctx, req.Session)
			} else {
				_, err = c.Variables(ctx, kid)
			}
			var ae *api.APIError
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.Code != api.CodeKernelDied || !errors.Is(err, pool.ErrKernelDied) ||
				!strings.Contains(ae.Message, tc.want[0]) || !strings.Contains(ae.Message, tc.want[1]) {
				t.Fatalf("listing whose repr ended the kernel: %v; want 409 kernel_died saying %q", err, tc.want)
			}
			wantOOM := uint64(0)
			if tc.oom {
				wantOOM = 1
			}
			if st := d.pool.Stats(); st.Died-before.Died != 1 || st.OOMKilled-before.OOMKilled != wantOOM {
				t.Fatalf("stats after the listing's death: died %d, oom_killed %d (before %d, %d); want +1, +%d",
					st.Died, st.OOMKilled, before.Died, before.OOMKilled, wantOOM)
			}
			if l := logs.String(); strings.Contains(l, "[ERROR]") {
				t.Fatalf("the daemon logged a failure: %q", l)
			}
			req.Code = "print('a' in dir())"
			next, err := c.Execute(ctx, req)
			if err != nil || next.Status != pool.StatusSuccess || next.Output != "False\n" || next.Kernel.ID == kid || next.Kernel.Reused || next.Kernel.StateReset {
				t.Fatalf("after the listing's death: %+v, %v; want a new kernel, no state_reset", next, err)
			}
		})
	}
}

// realSandbox gives the daemon's pool a real isolator (cgroup, kernel
// uids) over a state dir the kernel uids can traverse, as pool's
// newRealIsolator does; the test is skipped where that cannot run.
func realSandbox(t *testing.T) func(*pool.Config) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	state := shortTempDir(t)
	for p := state; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := isolate.DefaultConfig(state)
	cfg.CgroupParent = fmt.Sprintf("kernpool-apitest-%d-%s", os.Getpid(), strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	iso, err := isolate.New(cfg)
	if err != nil {
		t.Fatalf("isolate.New: %v", err)
	}
	t.Cleanup(func() {
		if err := iso.Close(); err != nil {
			t.Errorf("isolator Close: %v", err)
		}
	})
	return func(c *pool.Config) { c.StateDir, c.Sandboxes = state, iso }
}
