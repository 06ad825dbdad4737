package isolate

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// memBenchKernels is how many idle kernels BenchmarkIdleKernelMemory
// starts per profile; KERNPOOL_BENCH_KERNELS (bare) and
// KERNPOOL_BENCH_PRELOAD_KERNELS (preload) override it.
const memBenchKernels = 20

// meminfoKeys are the /proc/meminfo lines whose deltas say where an idle
// kernel's memory goes (kB).
var meminfoKeys = []string{"MemAvailable", "AnonPages", "PageTables", "KernelStack", "SUnreclaim"}

// BenchmarkIdleKernelMemory: the host memory N idle sandboxed kernels
// cost, per kernel, for a bare profile and one preloading numpy and
// matplotlib (and pandas where installed), each started separately (the
// default) and with memory_merge, side by side in one run. Host memory is
// the drop in MemAvailable (median of five readings before and after,
// the kernels idle) beside the sum of the kernels' own memory cgroups
// (usage, and its anon and kernel parts): not RSS sums, which count a
// shared page once per process. The meminfo deltas of page tables, kernel
// stacks and unreclaimable slab and the mean Pss of a kernel's init and
// interpreter say where the rest goes. The merging runs turn the host's
// ksmd on, faster than its default, and wait until two full scans merge
// under 1% more each; the knobs are restored afterwards. The rise of
// MemAvailable when the kernels end is reported too: its window is
// seconds, not the minutes of their start. Run it alone with
// -benchtime=1x: each profile starts and ends 2N kernels, and a loaded
// host makes the MemAvailable figures noisy (the cgroup ones are not).
func BenchmarkIdleKernelMemory(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCgroupMode(b, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(b)
	if _, err := os.Stat(filepath.Join(ksmDir, "run")); err != nil {
		b.Skipf("no samepage merging on this kernel: %v", err)
	}
	small := buildInit(b)
	for _, c := range []struct {
		name    string
		preload []string
		env     string
	}{{"bare", nil, "KERNPOOL_BENCH_KERNELS"}, {"preload", heavyPreload(b), "KERNPOOL_BENCH_PRELOAD_KERNELS"}} {
		n := benchKernels(b, c.env)
		b.Run(c.name, func(b *testing.B) {
			iso := func(merge bool) *Isolator {
				return newIso(b, func(cfg *Config) {
					cfg.InitPath = small
					if merge {
						cfg.CgroupParent += "-merge"
					}
					cfg.UIDRange = [2]int{60000, 60000 + n + 16}
					cfg.Profiles = map[string]Profile{DefaultProfile: {
						Resources: LimitsResources(Limits{MemoryMax: 256 << 20, PidsMax: 64}), MemoryMerge: merge,
					}}
				})
			}
			separate, merged := iso(false), iso(true)
			for b.Loop() {
				sep := idleKernels(b, separate, n, c.preload, false)
				mer := idleKernels(b, merged, n, c.preload, true)
				sep.report(b, "separate")
				mer.report(b, "merged")
				b.ReportMetric(mer.host/sep.host, "merged/separate-host")
				b.ReportMetric(mer.release/sep.release, "merged/separate-host-release")
				b.ReportMetric(mer.cgroup/sep.cgroup, "merged/separate-cgroup")
			}
		})
	}
}

// benchKernels is the kernel count the variable env sets, else
// memBenchKernels.
func benchKernels(b *testing.B, env string) int {
	s := os.Getenv(env)
	if s == "" {
		return memBenchKernels
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		b.Fatalf("%s=%q: want a positive count", env, s)
	}
	return v
}

// heavyPreload is numpy and matplotlib, and pandas where installed.
func heavyPreload(b *testing.B) []string {
	var have []string
	for _, m := range []string{"numpy", "matplotlib", "pandas"} {
		if exec.Command(testenv.Python, "-c", "import "+m).Run() == nil {
			have = append(have, m)
		}
	}
	if len(have) < 2 {
		b.Skip("needs python3-numpy and python3-matplotlib")
	}
	return have
}

// idleFigures are one run's figures, MiB per kernel: host is the drop in
// MemAvailable from before the first start to the kernels idle, release
// its rise from then to after the last one ended (a window of seconds,
// not minutes: less of other processes' drift on a shared host).
type idleFigures struct {
	host, release, cgroup, anon, kmem float64
	meminfo                           map[string]float64
	initPss, pythonPss, initAnon      float64
}

func (f idleFigures) report(b *testing.B, label string) {
	b.ReportMetric(f.host, "MiB-host/"+label)
	b.ReportMetric(f.release, "MiB-host-release/"+label)
	b.ReportMetric(f.cgroup, "MiB-cgroup/"+label)
	b.ReportMetric(f.anon, "MiB-cgroup-anon/"+label)
	b.ReportMetric(f.kmem, "MiB-cgroup-kernel/"+label)
	for _, k := range meminfoKeys[1:] {
		b.ReportMetric(f.meminfo[k], "MiB-"+k+"/"+label)
	}
	b.ReportMetric(f.initPss, "MiB-init-pss/"+label)
	b.ReportMetric(f.initAnon, "MiB-init-anon/"+label)
	b.ReportMetric(f.pythonPss, "MiB-python-pss/"+label)
}

// idleKernels starts n kernels of iso's default profile, lets them idle
// (with merge: until ksmd merged what it could), measures, and ends them
// all, their cgroups gone, before it returns.
func idleKernels(b *testing.B, iso *Isolator, n int, preload []string, merge bool) (f idleFigures) {
	b.StopTimer()
	defer b.StartTimer()
	if merge {
		ksmOn(b)
	}
	before := meminfoMedian(b)
	var sbs []*Sandbox
	var ks []*kernel.Kernel
	var idle map[string]int64
	defer func() {
		var wg sync.WaitGroup
		for _, k := range ks {
			wg.Go(func() { _ = k.Kill() })
		}
		wg.Wait()
		for _, sb := range sbs {
			assertGone(b, iso, sb.ID(), nil)
		}
		if idle != nil {
			f.release = float64(meminfoMedian(b)["MemAvailable"]-idle["MemAvailable"]) / 1024 / float64(n)
		}
	}()
	for range n {
		k, sb := startIdle(b, iso, preload, merge)
		ks, sbs = append(ks, k), append(sbs, sb)
	}
	if merge {
		ksmSettle(b)
	}
	after := meminfoMedian(b)
	idle = after
	mib := func(kb int64) float64 { return float64(kb) / 1024 / float64(n) }
	f = idleFigures{host: mib(before["MemAvailable"] - after["MemAvailable"]), meminfo: map[string]float64{}}
	for _, k := range meminfoKeys[1:] {
		f.meminfo[k] = mib(after[k] - before[k])
	}
	var usage, anon, kmem int64
	for _, sb := range sbs {
		u, a, km := groupMemory(b, iso, sb.ID())
		usage, anon, kmem = usage+u, anon+a, kmem+km
	}
	f.cgroup, f.anon, f.kmem = mib(usage/1024), mib(anon/1024), mib(kmem/1024)
	sample := sbs[:min(len(sbs), 8)]
	for _, sb := range sample {
		i, p, a := procPss(b, sb)
		f.initPss += float64(i) / 1024 / float64(len(sample))
		f.pythonPss += float64(p) / 1024 / float64(len(sample))
		f.initAnon += float64(a) / 1024 / float64(len(sample))
	}
	return f
}

// startIdle starts one kernel, preloads, and checks that merging is what
// the profile says.
func startIdle(b *testing.B, iso *Isolator, preload []string, merge bool) (*kernel.Kernel, *Sandbox) {
	ctx := context.Background()
	id := kernelID(b)
	sb, err := iso.reserve(id, "alice", "default", Limits{})
	if err != nil {
		b.Fatal(err)
	}
	k, err := kernel.Start(ctx, kernel.Spec{
		ID: id, Interpreter: testenv.Python, StateDir: iso.cfg.StateDir,
		Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Sandbox: sb,
	})
	if err != nil {
		_, _ = sb.Release()
		b.Fatal(err)
	}
	if got := sb.Isolation().MemoryMerge; got != merge {
		_ = k.Kill()
		b.Fatalf("kernel.isolation memory_merge %t, want %t", got, merge)
	}
	if len(preload) > 0 {
		if err := k.Preload(ctx, preload); err != nil {
			_ = k.Kill()
			b.Fatal(err)
		}
	}
	return k, sb
}

// ksmOn runs ksmd faster than its default for this benchmark and puts the
// host's knobs back when it ends.
func ksmOn(b *testing.B) {
	for _, kv := range [][2]string{{"pages_to_scan", "5000"}, {"sleep_millisecs", "10"}, {"run", "1"}} {
		p := filepath.Join(ksmDir, kv[0])
		old, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(kv[1]), 0); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.WriteFile(p, old, 0) })
	}
}

// ksmSettle waits until a whole ksmd scan merged nothing more (pages
// need two scans to merge), bounded by ten minutes.
func ksmSettle(b *testing.B) {
	deadline := time.Now().Add(10 * time.Minute)
	scans, sharing := ksmCounter(b, "full_scans"), ksmCounter(b, "pages_sharing")
	for settled := 0; settled < 2; {
		if time.Now().After(deadline) {
			b.Fatalf("ksmd still merging after 10 minutes (pages_sharing %d)", sharing)
		}
		time.Sleep(100 * time.Millisecond)
		if s := ksmCounter(b, "full_scans"); s > scans {
			now := ksmCounter(b, "pages_sharing")
			if now-sharing <= sharing/100 {
				settled++
			} else {
				settled = 0
			}
			scans, sharing = s, now
		}
	}
	b.ReportMetric(float64(sharing), "ksm-pages-sharing")
}

func ksmCounter(b *testing.B, name string) int64 {
	return int64(atoi(strings.TrimSpace(readFile(b, filepath.Join(ksmDir, name)))))
}

// groupMemory is a kernel's memory cgroup usage and its anon and kernel
// parts (bytes), v1 or v2.
func groupMemory(b *testing.B, iso *Isolator, id string) (usage, anon, kmem int64) {
	for _, d := range groupDirs(iso, id) {
		stat := func(key string) int64 {
			for _, l := range strings.Split(readFile(b, filepath.Join(d, "memory.stat")), "\n") {
				if v, ok := strings.CutPrefix(l, key+" "); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					return n
				}
			}
			return 0
		}
		num := func(file string) int64 {
			n, _ := strconv.ParseInt(strings.TrimSpace(readFile(b, filepath.Join(d, file))), 10, 64)
			return n
		}
		if _, err := os.Stat(filepath.Join(d, "memory.usage_in_bytes")); err == nil {
			return num("memory.usage_in_bytes"), stat("rss"), num("memory.kmem.usage_in_bytes")
		}
		if _, err := os.Stat(filepath.Join(d, "memory.current")); err == nil {
			return num("memory.current"), stat("anon"), stat("kernel")
		}
	}
	b.Fatalf("kernel %s has no memory cgroup", id)
	return 0, 0, 0
}

// meminfoMedian reads meminfoKeys five times, 200 ms apart, and keeps each
// key's median: other processes on a shared host allocate meanwhile.
func meminfoMedian(b *testing.B) map[string]int64 {
	reads := map[string][]int64{}
	for i := range 5 {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		for k, v := range meminfo(b) {
			reads[k] = append(reads[k], v)
		}
	}
	out := map[string]int64{}
	for k, v := range reads {
		slices.Sort(v)
		out[k] = v[len(v)/2]
	}
	return out
}

func meminfo(b *testing.B) map[string]int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || !slices.Contains(meminfoKeys, name) {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			b.Fatalf("/proc/meminfo %s: %v", name, err)
		}
		out[name] = v
	}
	if len(out) != len(meminfoKeys) {
		b.Fatalf("/proc/meminfo: found %d of %v", len(out), meminfoKeys)
	}
	return out
}

// procPss is the Pss (kB) of a kernel's init (the lowest pid of its
// group) and of the rest of its processes (the interpreter and its
// watchdog), and the init's anonymous memory.
func procPss(b *testing.B, sb *Sandbox) (initKB, restKB, initAnonKB int64) {
	pids, err := sb.Procs()
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(pids)
	for i, pid := range pids {
		kb := rollup(b, pid, "Pss")
		if i == 0 {
			initKB, initAnonKB = kb, rollup(b, pid, "Anonymous")
		} else {
			restKB += kb
		}
	}
	return initKB, restKB, initAnonKB
}

// rollup is one figure (kB) of a process's smaps_rollup.
func rollup(b *testing.B, pid int, key string) int64 {
	for _, l := range strings.Split(readFile(b, fmt.Sprintf("/proc/%d/smaps_rollup", pid)), "\n") {
		if rest, ok := strings.CutPrefix(l, key+":"); ok {
			var v int64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	b.Fatalf("no %s for pid %d", key, pid)
	return 0
}
