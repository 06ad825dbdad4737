package isolate

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// placeCode does what the runner does first on v1: place itself.
const placeCode = `import os
for p in os.environ.get("KERNPOOL_CGROUP_PROCS", "").split(os.pathsep):
    if p:
        with open(p, "w") as f: f.write("0")
`

// BenchmarkSpawnPlain: a cold `python -c pass` in its own process group.
func BenchmarkSpawnPlain(b *testing.B) {
	testenv.RequirePython(b)
	for b.Loop() {
		cmd := exec.Command(testenv.Python, "-c", placeCode)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpawnCgroupUID: the same with the whole sandbox life: uid
// reservation, group creation with limits, chown, uid switch, placement
// (self-placement on v1, clone3 on v2), kill, wait-empty, group removal.
func BenchmarkSpawnCgroupUID(b *testing.B) {
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(b)
	benchSpawnSandbox(b, nil)
}

// BenchmarkSpawnCgroup: as above without the uid switch.
func BenchmarkSpawnCgroup(b *testing.B) {
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(b)
	benchSpawnSandbox(b, func(c *Config) { c.RunAsUser = false })
}

func benchSpawnSandbox(b *testing.B, edit func(*Config)) {
	iso := newIso(b, edit)
	staging := stateDir(b)
	for b.Loop() {
		sb, err := iso.reserve(kernelID(b), "alice", "default", Limits{MemoryMax: 256 << 20, PidsMax: 64})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(testenv.Python, "-c", placeCode)
		if err := sb.Prepare(cmd, staging); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		_ = sb.Started(cmd.Process.Pid)
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		_ = sb.Kill()
		if _, err := sb.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlacement isolates v1 self-placement: the same spawn into a
// pre-made group, with and without the runner's writes of "0".
func BenchmarkPlacement(b *testing.B) {
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid)
	testenv.RequirePython(b)
	iso := newIso(b, func(c *Config) { c.RunAsUser = false })
	sb, err := iso.reserve(kernelID(b), "alice", "default", Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sb.Kill(); _, _ = sb.Release() })
	files := strings.Join(sb.group.PlacementFiles(), ":")
	for _, c := range []struct{ name, env string }{{"none", ""}, {"self", files}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(testenv.Python, "-c", placeCode)
				cmd.Env = []string{kernel.EnvCgroupProcs + "=" + c.env}
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// treeCode makes a 50-process tree: the leader and 49 sleeping children.
const treeCode = placeCode + `import os, sys, time
for _ in range(49):
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
print("ready", flush=True)
time.sleep(300)
`

// BenchmarkKillTree50: kill a 50-process tree and wait until none of it
// runs: killpg + reap vs the cgroup kill (v1: freeze, SIGKILL, thaw).
func BenchmarkKillTree50(b *testing.B) {
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(b)
	iso := newIso(b, func(c *Config) { c.RunAsUser = false })
	b.Run("killpg", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			cmd, pids := startTree(b, nil)
			b.StartTimer()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			for _, pid := range pids {
				for alive(pid) {
					time.Sleep(20 * time.Microsecond)
				}
			}
		}
	})
	b.Run("cgroup", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			sb, err := iso.reserve(kernelID(b), "alice", "default", Limits{})
			if err != nil {
				b.Fatal(err)
			}
			cmd, _ := startTree(b, sb)
			b.StartTimer()
			if err := sb.group.Kill(); err != nil {
				b.Fatal(err)
			}
			_ = cmd.Wait()
			if err := sb.group.WaitEmpty(5 * time.Second); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_, _ = sb.Release()
			b.StartTimer()
		}
	})
}

func startTree(b *testing.B, sb *Sandbox) (*exec.Cmd, []int) {
	cmd := exec.Command(testenv.Python, "-c", treeCode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if sb != nil {
		if err := sb.Prepare(cmd, b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if sb != nil {
		_ = sb.Started(cmd.Process.Pid)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		b.Fatalf("tree: %q %v", line, err)
	}
	var pids []int
	for _, f := range strings.Fields(readFile(b, "/proc/"+itoa(cmd.Process.Pid)+"/task/"+itoa(cmd.Process.Pid)+"/children")) {
		pids = append(pids, atoi(f))
	}
	if len(pids) != 49 {
		b.Fatalf("tree has %d children", len(pids))
	}
	return cmd, append(pids, cmd.Process.Pid)
}

func readFile(b *testing.B, p string) string {
	d, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	return string(d)
}

// buildInit builds cmd/kernpool-init, the small init binary.
func buildInit(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "kernpool-init")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/kernpool/kernpool/cmd/kernpool-init")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build kernpool-init: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkColdStart: request to first result of a whole sandboxed kernel
// (uid, cgroup with limits, kernel.Start, first cell `x=1`) with the
// kernel init step (namespaces, private tmpfs, /proc, seccomp) through the
// small kernpool-init binary, the same through the re-executed test binary,
// and without the init step; teardown runs outside the timer. "paired"
// starts one kernel with and one without the init step per iteration, in
// alternating order, and reports both means and their difference, in wall
// time and in CPU time of the kernel's process tree (getrusage of reaped
// children: init and interpreter, or the interpreter alone). On a shared,
// loaded host wall time stretches every CPU millisecond by the load; the
// CPU difference is the init step's own cost.
func BenchmarkColdStart(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(b)
	small := buildInit(b)
	for _, c := range []struct {
		name string
		init bool
		path string
	}{{"init", true, small}, {"init-reexec", true, ""}, {"noinit", false, ""}} {
		b.Run(c.name, func(b *testing.B) {
			iso := newIso(b, func(cfg *Config) { cfg.InitStep, cfg.InitPath = c.init, c.path })
			for b.Loop() {
				coldStart(b, iso)
			}
		})
	}
	b.Run("paired", func(b *testing.B) {
		with := newIso(b, func(cfg *Config) { cfg.InitPath = small })
		without := newIso(b, func(cfg *Config) { cfg.InitStep, cfg.CgroupParent = false, cfg.CgroupParent+"-noinit" })
		pairedColdStarts(b, with, without, "init", "noinit")
	})
}

// pairedColdStarts times one cold start in a and one in z per iteration,
// in alternating order, and reports both means (wall, and CPU of the
// kernel's process tree) named an and zn, and their differences.
func pairedColdStarts(b *testing.B, a, z *Isolator, an, zn string) {
	var tA, tZ, cA, cZ time.Duration
	n := 0
	for b.Loop() {
		order := []*Isolator{a, z}
		if n%2 == 1 {
			order[0], order[1] = z, a
		}
		for _, iso := range order {
			before := childrenCPU(b)
			d := coldStart(b, iso)
			cpu := childrenCPU(b) - before
			if iso == a {
				tA, cA = tA+d, cA+cpu
			} else {
				tZ, cZ = tZ+d, cZ+cpu
			}
		}
		n++
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(tA), an+"-ns/op")
	b.ReportMetric(per(tZ), zn+"-ns/op")
	b.ReportMetric(per(tA-tZ), "delta-ns/op")
	b.ReportMetric(per(cA), an+"-cpu-ns/op")
	b.ReportMetric(per(cZ), zn+"-cpu-ns/op")
	b.ReportMetric(per(cA-cZ), "delta-cpu-ns/op")
}

// BenchmarkColdStartReaper: the cold start of BenchmarkColdStart (small
// init binary) whose init execs into the reaper against one that keeps
// its Go supervisor, paired: the delta is what the exec costs a start.
func BenchmarkColdStartReaper(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(b)
	small := buildInit(b)
	reaper := newIso(b, func(cfg *Config) { cfg.InitPath = small })
	goInit := newIso(b, func(cfg *Config) { cfg.InitPath, cfg.CgroupParent = small, cfg.CgroupParent+"-go" })
	goInit.noReaper = true
	pairedColdStarts(b, reaper, goInit, "reaper", "go")
}

// childrenCPU is the user+system CPU time of this process's reaped
// children (and theirs, once reaped in turn).
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// coldStart starts one kernel in a new sandbox of iso, runs `x=1` and
// returns the time from the request to the result; the teardown is not
// timed.
func coldStart(b *testing.B, iso *Isolator) time.Duration {
	ctx := context.Background()
	t0 := time.Now()
	id := kernelID(b)
	sb, err := iso.reserve(id, "alice", "default", Limits{MemoryMax: 256 << 20, PidsMax: 64})
	if err != nil {
		b.Fatal(err)
	}
	k, err := kernel.Start(ctx, kernel.Spec{
		ID: id, Interpreter: testenv.Python, StateDir: iso.cfg.StateDir,
		Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Sandbox: sb,
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := k.Exec(ctx, kernel.Cell{Code: "x=1"}); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	b.StopTimer()
	_ = k.Kill()
	b.StartTimer()
	return d
}

// BenchmarkColdStartMounts: the cold start of BenchmarkColdStart (small
// init binary) with every mount of the sandbox (cgroup namespace, other
// kernels' staging mounts hidden, host paths found at start private or
// read-only, devpts, mqueue, the staging dir's own tmpfs) against the
// earlier sandbox's mounts only (private /tmp, /var/tmp, /dev/shm, /proc),
// one of each per iteration in alternating order: the delta is what the
// new mounts cost, in wall and in CPU time of the kernel's process tree.
func BenchmarkColdStartMounts(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(b)
	small := buildInit(b)
	all := newIso(b, func(cfg *Config) { cfg.InitPath = small })
	base := newIso(b, func(cfg *Config) { cfg.InitPath, cfg.CgroupParent = small, cfg.CgroupParent+"-base" })
	base.baseMounts = true
	pairedColdStarts(b, all, base, "mounts", "base")
	b.ReportMetric(float64(len(all.hostPaths.Private)+len(all.hostPaths.ReadOnly)), "host-paths")
}

// BenchmarkStagingMount: the daemon's side of the staging dir's own tmpfs
// on the start path (the mount; the detach at Release is off the timer:
// it waits for an RCU grace period, after the kernel has ended), which the
// children's CPU time of BenchmarkColdStartMounts does not include.
func BenchmarkStagingMount(b *testing.B) {
	testenv.RequireRoot(b)
	iso := newIso(b, nil)
	if !iso.useInit {
		b.Skip("no init step here: the staging dir stays a plain dir")
	}
	dir := filepath.Join(stateDir(b), "staging")
	s := &Sandbox{iso: iso, id: "bench", log: iso.log}
	for b.Loop() {
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		if _, err := s.MountStaging(dir); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.unmountStaging()
		b.StartTimer()
	}
}
