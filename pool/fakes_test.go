package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The seams' real implementations live in envscrub and rpcsock; these
// small stand-ins record what the pool hands them so the wiring itself is
// tested here.

// fakeToolFactory opens recording tool servers (no socket).
type fakeToolFactory struct{ rec *toolRecorder }

type toolRecorder struct {
	mu      sync.Mutex
	servers []*fakeToolServer
	uids    []int
}

func (f fakeToolFactory) Listen(staging string, uid int, tools []string) (ToolServer, error) {
	s := &fakeToolServer{endpoint: filepath.Join(staging, "rpc.sock"), token: "tok-" + newKernelID()[1:], tools: tools, staging: staging}
	if f.rec != nil {
		f.rec.mu.Lock()
		f.rec.servers = append(f.rec.servers, s)
		f.rec.uids = append(f.rec.uids, uid)
		f.rec.mu.Unlock()
	}
	return s, nil
}

func (f fakeToolFactory) Stub(tools []string) []byte {
	return []byte(fmt.Sprintf("TOOLS = %q.split(',')\n", strings.Join(tools, ",")))
}

func (f fakeToolFactory) last() *fakeToolServer {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return f.rec.servers[len(f.rec.servers)-1]
}

type fakeToolServer struct {
	endpoint, token, staging string
	tools                    []string

	mu       sync.Mutex
	handlers []ToolHandler
	budgets  []int
	begun    int
	ended    int
	closed   int
	report   int // what end() reports as calls made
}

func (s *fakeToolServer) Endpoint() string { return s.endpoint }
func (s *fakeToolServer) Token() string    { return s.token }

func (s *fakeToolServer) BeginCell(h ToolHandler, budget int) func() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begun++
	s.handlers = append(s.handlers, h)
	s.budgets = append(s.budgets, budget)
	return func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ended++
		return s.report
	}
}

func (s *fakeToolServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed++
	return nil
}

func (s *fakeToolServer) counts() (begun, ended, closed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun, s.ended, s.closed
}

// maskFactory builds filters that replace every secret by [MASKED] and
// records the secrets each kernel got.
type maskFactory struct{ rec *secretRecorder }

type secretRecorder struct {
	mu      sync.Mutex
	secrets [][]string
}

func (f maskFactory) ForKernel(secrets []string) OutputFilter {
	f.rec.mu.Lock()
	f.rec.secrets = append(f.rec.secrets, secrets)
	f.rec.mu.Unlock()
	return maskFilter{secrets}
}

type maskFilter struct{ secrets []string }

func (m maskFilter) Clean(text string) string {
	for _, s := range m.secrets {
		if s != "" {
			text = strings.ReplaceAll(text, s, "[MASKED]")
		}
	}
	return text
}

func (m maskFilter) CapText(text string) string { return m.Clean(text) }

func (m maskFilter) Finish(stdout, stderr, spillDir string, cell int) (CellOutput, error) {
	out := CellOutput{Stdout: m.Clean(stdout), Stderr: m.Clean(stderr), StdoutBytesTotal: len(stdout), StderrBytesTotal: len(stderr)}
	if len(out.Stdout) > 100 {
		// Spill like envscrub does, into the daemon-owned dir the pool names.
		if err := os.MkdirAll(spillDir, 0o700); err != nil {
			return out, err
		}
		out.SpillPath = filepath.Join(spillDir, fmt.Sprintf("cell_%06d_stdout.txt", cell))
		if err := os.WriteFile(out.SpillPath, []byte(out.Stdout), 0o600); err != nil {
			return out, err
		}
		out.Stdout, out.StdoutTruncated, out.Warning = out.Stdout[:100], true, "spilled to "+out.SpillPath
	}
	return out, nil
}
