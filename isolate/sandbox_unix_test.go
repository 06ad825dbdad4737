//go:build unix && !linux

package isolate

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/kernpool/kernpool/kernel"
)

// TestPrepareRlimits: without Linux's init step the runner sets the
// rlimits, from KERNPOOL_RLIMITS, which Prepare adds only when there are
// any.
func TestPrepareRlimits(t *testing.T) {
	for _, c := range []struct {
		name    string
		rlimits []Rlimit
		want    []string
	}{
		{"default", []Rlimit{{Name: "core"}, {Name: "nofile", Soft: 1024, Hard: 1024}}, []string{kernel.EnvRlimits + "=core=0:0,nofile=1024:1024"}},
		{"none", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			iso := bareIsolator(t)
			iso.cfg.Rlimits = c.rlimits
			sb, err := newSandbox(iso, "k1", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/bin/true")
			if err := sb.Prepare(cmd, t.TempDir()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cmd.Env, c.want) {
				t.Fatalf("env %q, want %q", cmd.Env, c.want)
			}
		})
	}
}
