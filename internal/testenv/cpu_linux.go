package testenv

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MeasureCPU starts counting CPU time; the returned function, called after
// the timed loop, reports per op (next to ns/op) this process's CPU
// ("host-cpu-ns/op") and, for pid > 0, that process's ("runner-cpu-ns/op"),
// and the context switches of each ("host-cs/op", "runner-cs/op"): on a
// VM a switch costs microseconds, and the protocol's wake-ups drive them.
// On a shared, loaded machine wall time mostly measures the neighbours;
// CPU time much less so.
func MeasureCPU(b *testing.B, pid int) func() {
	runner, host := procCPU(pid), selfCPU()
	runnerCS, hostCS := procSwitches(pid), selfSwitches()
	return func() {
		if b.N == 0 {
			return
		}
		b.ReportMetric(float64(selfCPU()-host)/float64(b.N), "host-cpu-ns/op")
		if r := procCPU(pid); pid > 0 && runner >= 0 && r >= 0 {
			b.ReportMetric(float64(r-runner)/float64(b.N), "runner-cpu-ns/op")
		}
		b.ReportMetric(float64(selfSwitches()-hostCS)/float64(b.N), "host-cs/op")
		if r := procSwitches(pid); pid > 0 && runnerCS >= 0 && r >= 0 {
			b.ReportMetric(float64(r-runnerCS)/float64(b.N), "runner-cs/op")
		}
	}
}

// procSwitches counts the context switches (voluntary and not) of all
// threads of pid (-1 when unknown).
func procSwitches(pid int) int64 {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue // a thread that ended
		}
		for _, line := range strings.Split(string(data), "\n") {
			if name, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(name, "voluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c // voluntary and nonvoluntary
			}
		}
	}
	return n
}

func selfSwitches() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// procCPU is utime+stime of pid (-1 when unknown); USER_HZ is 100 on
// every Linux ABI Go supports.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // fields 3 onward
	if len(f) < 13 {
		return -1
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(user+sys) * 10 * time.Millisecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
