package kernel

import "testing"

func TestSmoke(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	r := mustExec(t, k, "x=1\nx+1")
	t.Logf("%+v", r)
	r = mustExec(t, k, "import subprocess; subprocess.run(['echo','hi']); import os; os.system('echo err >&2')")
	t.Logf("%+v", r)
}
