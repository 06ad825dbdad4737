package kernel

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// pollSyscalls are poll(2)'s and ppoll(2)'s numbers (/proc/TID/syscall's
// first field) on the architectures the tests run on.
var pollSyscalls = map[string][]int{"amd64": {7, 271}, "arm64": {73}, "riscv64": {73}}[runtime.GOARCH]

// threadsInPoll counts pid's threads other than its main one, and how many
// of those sleep in poll(2): a thread still starting or running counts in
// others only.
func threadsInPoll(pid int) (others, inPoll int) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, _ := os.ReadDir(dir)
	for _, task := range tasks {
		if task.Name() == strconv.Itoa(pid) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, task.Name(), "syscall"))
		if err != nil {
			continue // the thread exited
		}
		others++
		nr, err := strconv.Atoi(strings.Fields(string(data) + " x")[0])
		for _, p := range pollSyscalls {
			if err == nil && nr == p {
				inPoll++
			}
		}
	}
	return others, inPoll
}
