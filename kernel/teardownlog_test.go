package kernel

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/internal/testenv"
)

// A kernel that runs a cell and is killed warns about nothing: its
// sandbox's kill and release and its staging dir's removal succeeded, and
// the operator's log says only what went wrong.
func TestCleanTeardownWarnsNothing(t *testing.T) {
	var logs testenv.SyncBuffer
	spec := baseSpec(t)
	spec.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &logs})
	k := startKernel(t, spec, "")
	mustExec(t, k, "1")
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); s != "" {
		t.Fatalf("warnings after a clean teardown:\n%s", s)
	}
}
