package isolate

import (
	"errors"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/kernel"
)

// enforce names the cgroup reason only when there is one.
func TestEnforceNamesTheCgroupReason(t *testing.T) {
	for _, c := range []struct {
		reason, want, not string
	}{
		{"no cgroupfs", "kernels would lack memory limits (cgroups: no cgroupfs). To fix", ""},
		{"", "kernels would lack memory limits. To fix", "(cgroups:"},
	} {
		err := Report{Isolation: kernel.IsolationSandbox, Lost: []string{"memory limits"}, CgroupReason: c.reason}.enforce()
		if !errors.Is(err, ErrIsolation) || !strings.Contains(err.Error(), c.want) || c.not != "" && strings.Contains(err.Error(), c.not) {
			t.Errorf("reason %q: %v; want ErrIsolation saying %q", c.reason, err, c.want)
		}
	}
}

// Allows, in process mode, names what is lost only when something is.
func TestAllowsNamesLossesOnlyWhenThereAreSome(t *testing.T) {
	for _, c := range []struct {
		lost []string
		want string
	}{
		{nil, "nothing beyond sandbox mode on this host"},
		{[]string{}, "nothing beyond sandbox mode on this host"},
		{[]string{"memory limits"}, "kernels lack memory limits"},
		{[]string{"memory limits", "seccomp"}, "kernels lack memory limits; seccomp"},
	} {
		r := Report{Isolation: kernel.IsolationProcess, RunAsUser: true, Lost: c.lost}
		if got := r.Allows(); got != c.want {
			t.Errorf("lost %q: Allows() = %q, want %q", c.lost, got, c.want)
		}
	}
}
