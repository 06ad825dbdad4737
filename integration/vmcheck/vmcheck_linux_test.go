//go:build integration && linux

package vmcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

const (
	cgRoot = "/sys/fs/cgroup"
	marker = "kernpool-vmcheck"
	// waitFor only stops a check whose event never comes: under TCG on a
	// loaded host a python3 that forks three processes took over 10 s.
	waitFor = 2 * time.Minute
)

// requireUnifiedV2 skips unless /sys/fs/cgroup is a cgroup2 mount with the
// memory and pids controllers, and we are root with python3 present; why
// says what of v2 the test needs.
func requireUnifiedV2(t *testing.T, why string) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequirePython(t)
	var st unix.Statfs_t
	if err := unix.Statfs(cgRoot, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Skipf("needs cgroup v2: %s; /sys/fs/cgroup is not unified here (integration/vm/run provides it)", why)
	}
	ctrl, _ := os.ReadFile(filepath.Join(cgRoot, "cgroup.controllers"))
	for _, c := range []string{"memory", "pids"} {
		if !strings.Contains(string(ctrl), c) {
			t.Skipf("cgroup v2 root lacks the %s controller", c)
		}
	}
}

// ownGroup is the cgroup v2 group this process lives in.
func ownGroup(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(cgRoot, p)
		}
	}
	t.Fatalf("no cgroup v2 line in /proc/self/cgroup: %q", b)
	return ""
}

func write(t *testing.T, path, val string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
		t.Fatalf("write %s=%q: %v", path, val, err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

// keyed returns the value of key in a flat-keyed cgroup file.
func keyed(t *testing.T, path, key string) int64 {
	t.Helper()
	for _, line := range strings.Split(read(t, path), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return -1
}

// pool returns a marked pool parent with the memory and pids controllers
// enabled, removed (after a cgroup.kill) at cleanup. When this process is
// alone in its group (the VM runner's delegated service group) it builds the
// layout kernpool needs under systemd Delegate=yes: it moves itself into a
// "supervisor" leaf, enables the controllers for its children and creates
// the pool beside the leaf. When others share its group (an ssh session
// under Vagrant) it creates the pool under the root group instead.
func pool(t *testing.T) string {
	t.Helper()
	own := ownGroup(t)
	tag := fmt.Sprintf("%s-%d", marker, os.Getpid())
	if procsOf(own) != strconv.Itoa(os.Getpid()) {
		parent := filepath.Join(cgRoot, tag+"-pool")
		if err := os.Mkdir(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = os.WriteFile(filepath.Join(parent, "cgroup.kill"), []byte("1"), 0o644)
			removeTree(t, parent)
		})
		write(t, filepath.Join(parent, "cgroup.subtree_control"), "+memory +pids")
		return parent
	}
	sup := filepath.Join(own, tag+"-supervisor")
	parent := filepath.Join(own, tag+"-pool")
	if err := os.Mkdir(sup, 0o755); err != nil {
		t.Fatalf("mkdir %s: %v", sup, err)
	}
	// The test binary is multi-threaded; cgroup.procs moves all threads.
	write(t, filepath.Join(sup, "cgroup.procs"), strconv.Itoa(os.Getpid()))
	restore := func() {
		_ = os.WriteFile(filepath.Join(own, "cgroup.subtree_control"), []byte("-memory -pids"), 0o644)
		if err := os.WriteFile(filepath.Join(own, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			t.Errorf("moving back into %s: %v", own, err)
		}
		removeTree(t, sup)
	}
	if err := os.WriteFile(filepath.Join(own, "cgroup.subtree_control"), []byte("+memory +pids"), 0o644); err != nil {
		restore()
		t.Fatalf("enable controllers in %s after leaving it: %v", own, err)
	}
	if err := os.Mkdir(parent, 0o755); err != nil {
		restore()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(parent, "cgroup.kill"), []byte("1"), 0o644)
		removeTree(t, parent)
		restore()
	})
	write(t, filepath.Join(parent, "cgroup.subtree_control"), "+memory +pids")
	return parent
}

// removeTree removes a cgroup tree bottom-up once it is empty.
func removeTree(t *testing.T, dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	deadline := time.Now().Add(waitFor)
	for i := len(dirs) - 1; i >= 0; i-- {
		for {
			err := os.Remove(dirs[i])
			if err == nil || os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cannot remove cgroup %s: %v (procs: %s)", dirs[i], err, procsOf(dirs[i]))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func procsOf(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return strings.Join(strings.Fields(string(b)), ",")
}

// spawnInto starts python with code directly inside group via clone3
// CLONE_INTO_CGROUP, so no instruction of it runs outside the group.
func spawnInto(t *testing.T, group, code string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	fd, err := unix.Open(group, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var out bytes.Buffer
	cmd := exec.Command(testenv.Python, "-c", code)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("spawn into %s: %v", group, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, &out
}

func newGroup(t *testing.T, parent, name string, limits map[string]string) string {
	t.Helper()
	g := filepath.Join(parent, name)
	if err := os.Mkdir(g, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range limits {
		write(t, filepath.Join(g, k), v)
	}
	return g
}
