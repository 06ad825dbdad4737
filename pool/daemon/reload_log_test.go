package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool/daemon"
)

// TestReloadLogsOnlyWhatHappened: each reload logs one verdict line per
// kind of change it saw: "applied" only when a reloadable setting
// changed, "only a restart applies them" only when another one did,
// "nothing changed" only when neither did; none of them says unchanged
// credentials are not in use.
func TestReloadLogsOnlyWhatHappened(t *testing.T) {
	d, _, logs := reloadDaemon(t, testConfig(t))
	const applied, restart, nothing = "reload applied to new kernels and requests", "only a restart applies them", "reload: nothing changed"
	const unused = "credentials changed but not in use" // no credential changes here
	for _, tc := range []struct {
		name string
		set  func(*daemon.Config)
		want []string // verdict lines logged
	}{
		{"a reloadable setting", func(c *daemon.Config) { c.MaxKernelsPerOwner++ }, []string{applied}},
		{"a restart setting", func(c *daemon.Config) { c.IdleTimeout += time.Minute }, []string{restart}},
		{"nothing", func(*daemon.Config) {}, []string{nothing}},
		{"both kinds", func(c *daemon.Config) { c.MaxKernelsPerOwner++; c.IdleTimeout += time.Minute }, []string{applied, restart}},
	} {
		before := len(logs.String())
		next := cloneConfig(d.Config())
		tc.set(next)
		if err := d.Reload(next); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		log := logs.String()[before:]
		for _, verdict := range []string{applied, restart, nothing, unused} {
			want := 0
			for _, w := range tc.want {
				if w == verdict {
					want = 1
				}
			}
			if got := strings.Count(log, verdict); got != want {
				t.Errorf("%s: %q logged %d times, want %d:\n%s", tc.name, verdict, got, want, log)
			}
		}
	}
}
