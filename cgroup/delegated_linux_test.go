package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestDelegatedMovesDaemonIntoLeaf plays the systemd Delegate=yes layout:
// the test process's own (non-root) v2 group is treated as delegated, so
// New moves the process into <own>/supervisor and puts the pool parent and
// kernel groups beside it.
func TestDelegatedMovesDaemonIntoLeaf(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeUnified)
	testenv.RequirePython(t)
	own, err := ownV2Group()
	if err != nil {
		t.Fatal(err)
	}
	if own == "/" || strings.HasSuffix(own, "/"+DaemonLeaf) {
		t.Skipf("needs the test in a non-root group it may rearrange (own group %s)", own)
	}
	state := t.TempDir()
	yes := true
	m, err := New(Config{Parent: testParent(t), Marker: state, StateDir: state, Delegated: &yes})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info := m.Info()
	ownDir := filepath.Join(DefaultMount, own)
	if !info.Delegated || info.DaemonLeaf != filepath.Join(ownDir, DaemonLeaf) {
		t.Fatalf("info = %+v", info)
	}
	now, _ := ownV2Group()
	if now != filepath.Join(own, DaemonLeaf) {
		t.Fatalf("daemon is in %s, want the leaf", now)
	}
	if len(info.Parents) != 1 || filepath.Dir(info.Parents[0]) != ownDir {
		t.Fatalf("parent %v is not beside the leaf in %s", info.Parents, ownDir)
	}
	g, err := m.NewGroup("k00000000000000d6", limits(64<<20, 16))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(info.Parents[0], "k00000000000000d6", "memory.max"))
	if err != nil || strings.TrimSpace(string(b)) != "67108864" {
		t.Fatalf("memory.max = %q, %v", b, err)
	}
	cmd := startPlaced(t, g, "import time\ntime.sleep(300)\n")
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := g.Remove(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	dirGone(t, info.Parents[0])
}
