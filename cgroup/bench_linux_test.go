package cgroup

import (
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// treeCode forks 49 sleeping children: a 50-process tree.
const treeCode = `import os, time
for _ in range(49):
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
print("ready", flush=True)
time.sleep(300)
`

// BenchmarkKillTree50 kills a 50-process tree from its group and waits
// until the group is empty: cgroup.kill (v2, or the hybrid cgroup2 mount)
// vs the v1 freezer sequence (freeze, SIGKILL each, thaw).
func BenchmarkKillTree50(b *testing.B) {
	testenv.RequireCgroupMode(b, DetectMode(""), ModeLegacy, ModeHybrid, ModeUnified)
	testenv.RequirePython(b)
	m := newTestManager(b)
	variants := []struct {
		name    string
		freezer bool
	}{{"cgroup.kill", false}, {"v1-freezer", true}}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				g, err := m.NewGroup("k00000000000000f5", nil)
				if err != nil {
					b.Fatal(err)
				}
				if v1, ok := g.b.(*v1Group); ok && v.freezer {
					v1.udir = "" // the plain v1 path; the tree stays placed in v1
				} else if v.freezer {
					b.Skip("no v1 hierarchies here")
				} else if g.KillFile() == "" {
					b.Skip("no cgroup.kill here")
				}
				cmd := startPlaced(b, g, "print('ready', flush=True)\n"+treeCode)
				// Bounded poll (outside the timer) until the whole tree is placed.
				var procs []int
				for end := time.Now().Add(testenv.Patience); len(procs) < 50 && time.Now().Before(end); time.Sleep(time.Millisecond) {
					procs, _ = g.Procs()
				}
				if len(procs) != 50 {
					b.Fatalf("the tree has %d processes in its group, want 50", len(procs))
				}
				b.StartTimer()
				if err := g.Kill(); err != nil {
					b.Fatal(err)
				}
				_ = cmd.Wait()
				if err := g.WaitEmpty(5 * time.Second); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				if v1, ok := g.b.(*v1Group); ok && v1.udir == "" {
					v1.udir = m.b.(*v1Pool).udir
					if v1.udir != "" {
						v1.udir += "/k00000000000000f5"
					}
				}
				if err := g.Remove(5 * time.Second); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
