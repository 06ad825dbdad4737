package kernel

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuMeter reports, next to ns/op, the CPU time per op of the kernel's
// runner process and of this (host) process: on a shared, loaded machine
// wall time mostly measures the neighbours, CPU time much less so.
type cpuMeter struct {
	pid          int
	runner, host time.Duration
}

func startCPU(pid int) *cpuMeter {
	return &cpuMeter{pid: pid, runner: procCPU(pid), host: selfCPU()}
}

func (m *cpuMeter) report(b *testing.B) {
	if b.N == 0 || m.runner < 0 {
		return
	}
	if r := procCPU(m.pid); r >= 0 {
		b.ReportMetric(float64(r-m.runner)/float64(b.N), "runner-cpu-ns/op")
	}
	b.ReportMetric(float64(selfCPU()-m.host)/float64(b.N), "host-cpu-ns/op")
}

// procCPU is utime+stime of pid (-1 when unknown); USER_HZ is 100 on
// every Linux ABI Go supports.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // fields from 3 on
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(u+st) * 10 * time.Millisecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
