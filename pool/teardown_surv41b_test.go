package pool

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/kernpool/kernpool/internal/testenv"
)

// closeFailTools opens fake tool servers whose Close fails with err (nil:
// closes cleanly).
type closeFailTools struct {
	fakeToolFactory
	err error
}

func (f closeFailTools) Listen(staging string, uid int, tools []string) (ToolServer, error) {
	s, err := f.fakeToolFactory.Listen(staging, uid, tools)
	if err != nil || f.err == nil {
		return s, err
	}
	return closeFailServer{s, f.err}, nil
}

type closeFailServer struct {
	ToolServer
	err error
}

func (s closeFailServer) Close() error {
	_ = s.ToolServer.Close()
	return s.err
}

// Stopping a kernel warns only of what failed: a clean stop (the kernel
// killed, its tool server closed) logs no warning, and a tool server
// whose Close fails is one warning naming the error. A warning on every
// stop would bury the real ones an operator alerts on.
func TestKernelStopWarnsOnlyOfAFailedToolClose(t *testing.T) {
	handler := ToolHandlerFunc(func(context.Context, ToolCall) (string, error) { return "r", nil })
	for _, tc := range []struct {
		name     string
		closeErr error
		want     []string // what the one warning says; nil: no warning
	}{
		{"tool server closes", nil, nil},
		{"tool server close fails", errors.New("socket busy"), []string{"tool server close failed", "socket busy"}},
	} {
		var logs testenv.SyncBuffer
		p := newTestPool(t, func(c *Config) {
			c.Tools = closeFailTools{fakeToolFactory{rec: &toolRecorder{}}, tc.closeErr}
			c.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
		})
		res := run(t, p, Request{Tools: []string{"t"}, ToolHandler: handler, Code: "1"})
		wantStatus(t, res, StatusSuccess)
		before := len(logs.String())
		if err := p.Kill(res.Kernel.ID); err != nil { // tears down before it returns
			t.Fatal(err)
		}
		got := strings.TrimSpace(logs.String()[before:])
		var lines []string
		if got != "" {
			lines = strings.Split(got, "\n")
		}
		if want := min(len(tc.want), 1); len(lines) != want {
			t.Fatalf("%s: the stop logged %d warnings %q; want %d", tc.name, len(lines), lines, want)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the stop's warning %q does not say %q", tc.name, got, w)
			}
		}
	}
}
