package isolate

import (
	"strings"
	"testing"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
)

// TestDoctorReportOnThisHost checks the doctor text names what it must and
// logs it (go test -v shows what this host gives kernels).
func TestDoctorReportOnThisHost(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	iso := newIso(t, nil)
	r := iso.Report()
	s := r.String()
	t.Logf("doctor:\n%s", s)
	if !r.CgroupActive || !r.RunAsUser || r.UIDFirst != 60000 || r.UIDLast != 60999 {
		t.Errorf("report = %+v", r)
	}
	for _, want := range []string{"cgroup mode:", "controllers:", "delegation:", "kernel uids:", "60000-60999", "tree kill:"} {
		if !strings.Contains(s, want) {
			t.Errorf("doctor text lacks %q", want)
		}
	}
}
