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
// ("host-cpu-ns/op") and, for pid > 0, that process's ("runner-cpu-ns/op").
// On a shared, loaded machine wall time mostly measures the neighbours;
// CPU time much less so.
func MeasureCPU(b *testing.B, pid int) func() {
	runner, host := procCPU(pid), selfCPU()
	return func() {
		if b.N == 0 {
			return
		}
		b.ReportMetric(float64(selfCPU()-host)/float64(b.N), "host-cpu-ns/op")
		if r := procCPU(pid); pid > 0 && runner >= 0 && r >= 0 {
			b.ReportMetric(float64(r-runner)/float64(b.N), "runner-cpu-ns/op")
		}
	}
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
