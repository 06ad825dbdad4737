package kinit

import (
	"os"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"golang.org/x/sys/unix"
)

// BenchmarkSetupMounts: the init's mount step alone, with every mount of
// the sandbox against the earlier sandbox's only (BaseMounts: private
// /tmp, /var/tmp, /dev/shm and /proc), one of each per iteration in
// alternating order, each on a fresh thread in a private copy of the mount
// namespace (as the init's clone makes one either way). The new mounts are
// the cgroup namespace with every cgroup hierarchy mounted again (all of
// them: a kernel is placed in fewer), a private tmpfs on each sticky
// world-writable dir below, a devpts and an mqueue of its own. Besides
// wall time it reports the thread's CPU time: the mount syscalls' own
// cost, which a loaded host stretches far less than wall time, and which
// BenchmarkColdStartMounts (isolate) buries under an interpreter's start.
// The staging dir's tmpfs (isolate's BenchmarkStagingMount) and the
// mounts' teardown when the kernel's namespace goes are not in it.
func BenchmarkSetupMounts(b *testing.B) {
	testenv.RequireRoot(b)
	mounts, err := readMounts()
	if err != nil {
		b.Fatal(err)
	}
	var placed []string
	for _, m := range mounts {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			placed = append(placed, m.point+"/kernel/cgroup.procs")
		}
	}
	all := Config{TmpSize: DefaultTmpSize, PtyMax: DefaultPtyMax, Private: stickyDirs(), CgroupProcs: placed}
	base := Config{TmpSize: DefaultTmpSize, BaseMounts: true}
	var tAll, tBase, cAll, cBase time.Duration
	n := 0
	for b.Loop() {
		order := []*Config{&all, &base}
		if n%2 == 1 {
			order[0], order[1] = &base, &all
		}
		for _, cfg := range order {
			wall, cpu := timeSetup(b, *cfg)
			if cfg == &all {
				tAll, cAll = tAll+wall, cAll+cpu
			} else {
				tBase, cBase = tBase+wall, cBase+cpu
			}
		}
		n++
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(per(tAll), "mounts-ns/op")
	b.ReportMetric(per(tBase), "base-ns/op")
	b.ReportMetric(per(tAll-tBase), "delta-ns/op")
	b.ReportMetric(per(cAll), "mounts-cpu-ns/op")
	b.ReportMetric(per(cBase), "base-cpu-ns/op")
	b.ReportMetric(per(cAll-cBase), "delta-cpu-ns/op")
	b.ReportMetric(float64(len(all.Private)), "private-dirs")
	b.ReportMetric(float64(len(placed)), "cgroup-mounts")
}

// timeSetup runs setupMounts(cfg) on a fresh thread in a private copy of
// the mount namespace (gone with the thread) and returns its wall and
// thread CPU time.
func timeSetup(b *testing.B, cfg Config) (wall, cpu time.Duration) {
	err := offMainThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return err
		}
		var c0, c1 unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c0)
		t0 := time.Now()
		_, err := setupMounts(cfg)
		wall = time.Since(t0)
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c1)
		cpu = time.Duration(c1.Nano() - c0.Nano())
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return wall, cpu
}

// stickyDirs are the sticky world-writable dirs of this host the daemon's
// walk would make private besides /tmp, /var/tmp and /dev/shm (a short
// list here; isolate's BenchmarkColdStartMounts uses the real walk).
func stickyDirs() []string {
	var out []string
	for _, d := range []string{"/run/lock", "/var/lock", "/var/crash", "/run/screen"} {
		fi, err := os.Lstat(d)
		if err == nil && fi.IsDir() && fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm()&0o002 != 0 {
			out = append(out, d)
		}
	}
	return out
}
