package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// cgroupMemoryLimit reads the memory limit of pid's cgroup from the
// cgroup files themselves (v1 memory.limit_in_bytes, else v2 memory.max).
func cgroupMemoryLimit(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var file string
	for _, line := range strings.Split(string(raw), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
			}
		}
		if parts[0] == "0" && file == "" {
			file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.max")
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("kernel %d: %v", pid, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q", file, b)
	}
	return n
}

// kernelPid runs a cell for owner and returns its kernel's pid.
func kernelPid(t *testing.T, client *api.Client, owner string) int {
	t.Helper()
	res, err := client.Execute(context.Background(), pool.Request{Owner: owner, Code: "1"})
	if err != nil || res.Status != pool.StatusSuccess {
		t.Fatalf("cell of %s: %v %+v", owner, err, res)
	}
	kernels, err := client.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kernels {
		if k.ID == res.Kernel.ID {
			return k.Pid
		}
	}
	t.Fatalf("kernel %s of %s not listed", res.Kernel.ID, owner)
	return 0
}

// TestReloadMemoryLimit: SIGHUP applies a new memory limit to new kernels
// only; the old kernel's cgroup keeps the old limit; a bad file is
// refused and the running configuration kept.
func TestReloadMemoryLimit(t *testing.T) {
	testenv.RequireRoot(t) // cgroup limits need root
	conf, _ := opsConfig(t, "profile \"default\" {\n  memory_max = \"64MiB\"\n}\n")
	d := startServe(t, "--config", conf)
	client := api.NewClient(d.socket)
	defer client.CloseIdleConnections()
	old := kernelPid(t, client, "before")
	if got := cgroupMemoryLimit(t, old); got != 64<<20 {
		t.Fatalf("first kernel's limit %d, want 64 MiB", got)
	}
	src, _ := os.ReadFile(conf)
	rewrite := func(s string) {
		if err := os.WriteFile(conf, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(strings.Replace(string(src), "64MiB", "96MiB", 1))
	waitUntil(t, "the reload", func() bool { return strings.Contains(d.logText(), "reload applied") })
	if !strings.Contains(d.logText(), `default\": memory 64MiB`) || !strings.Contains(d.logText(), "-> memory 96MiB") {
		t.Errorf("the reload does not log what changed:\n%s", d.logText())
	}
	fresh := kernelPid(t, client, "after")
	if got := cgroupMemoryLimit(t, fresh); got != 96<<20 {
		t.Errorf("new kernel's limit %d, want 96 MiB", got)
	}
	if got := cgroupMemoryLimit(t, old); got != 64<<20 {
		t.Errorf("old kernel's limit changed to %d, want 64 MiB", got)
	}
	rewrite("profile \"default\" {\n  memory_max = \"lots\"\n}\n")
	waitUntil(t, "the refused reload", func() bool { return strings.Contains(d.logText(), "reload refused") })
	if !strings.Contains(d.logText(), "memory_max") {
		t.Errorf("the refusal does not say why:\n%s", d.logText())
	}
	if got := cgroupMemoryLimit(t, kernelPid(t, client, "later")); got != 96<<20 {
		t.Errorf("after a bad reload a new kernel's limit is %d, want the running 96 MiB", got)
	}
}
