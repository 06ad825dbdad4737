package kernel

import (
	"bytes"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// syncBuffer is a log sink the kernel's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A kernel that runs a cell and is killed warns about nothing: its
// sandbox's kill and release and its staging dir's removal succeeded, and
// the operator's log says only what went wrong.
func TestCleanTeardownWarnsNothing(t *testing.T) {
	var logs syncBuffer
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
