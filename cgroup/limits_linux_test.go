package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/kernpool/kernpool/internal/testenv"
)

// TestLimitsAreWritten reads the limits back from cgroupfs.
func TestLimitsAreWritten(t *testing.T) {
	testenv.RequireCgroupMode(t, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	m := newTestManager(t)
	mem, pids, quota, period, shares := int64(64<<20), int64(16), int64(50000), uint64(100000), uint64(512)
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &mem},
		Pids:   &specs.LinuxPids{Limit: &pids},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period, Shares: &shares},
	}
	const id = "k00000000000000e7"
	g, err := m.NewGroup(id, res)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove(0)
	info := m.Info()
	var want map[string]string
	if info.Mode == ModeUnified {
		want = map[string]string{
			"memory.max": "67108864", "memory.swap.max": "0", "memory.oom.group": "1",
			"pids.max": "16", "cpu.max": "50000 100000",
		}
	} else {
		want = map[string]string{
			"memory/memory.limit_in_bytes": "67108864", "pids/pids.max": "16",
			"cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.shares": "512",
		}
		if info.MemswAvailable {
			want["memory/memory.memsw.limit_in_bytes"] = "67108864"
		}
	}
	for file, v := range want {
		path := filepath.Join(info.Parents[0], id, file)
		if info.Mode != ModeUnified {
			ctrl, name, _ := strings.Cut(file, "/")
			path = filepath.Join(DefaultMount, ctrl, "/"+filepath.Base(info.Parents[0]), id, name)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if got := strings.TrimSpace(string(b)); got != v {
			t.Errorf("%s = %q, want %q", file, got, v)
		}
	}
}
