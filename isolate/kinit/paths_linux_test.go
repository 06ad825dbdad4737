package kinit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The init's path and option helpers run only in the re-executed init,
// which no coverage sees; these tests hold their results in-process, each
// expected value written out by hand.

func TestTmpInodes(t *testing.T) {
	for _, c := range []struct{ size, want int64 }{
		{0, 1024}, {4096 * 1024, 1024}, {4096*1025 + 4095, 1025}, {64 << 20, 16384},
	} {
		if got := TmpInodes(c.size); got != c.want {
			t.Errorf("TmpInodes(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:          "/plain",
		`/a\040b`:         "/a b",
		`/x\134y\011z`:    "/x\\y\tz",
		`/end\040`:        "/end ",
		`/short\04`:       `/short\04`, // three digits or nothing
		`/bad\999\0`:      `/bad\999\0`,
		`\040\040`:        "  ",
		`/tab\011\040end`: "/tab\t end",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCgroupOpts(t *testing.T) {
	for _, c := range []struct{ fstype, super, want string }{
		{"cgroup2", "rw,nsdelegate,memory_recursiveprot", "memory_recursiveprot"},
		{"cgroup2", "ro,nsdelegate", ""},
		{"cgroup", "rw,cpu,cpuacct", "cpu,cpuacct"},
		{"cgroup", "rw,,memory", "memory"},
		{"cgroup", "ro,name=systemd", "none,name=systemd"},
		{"cgroup", "rw,xattr,name=systemd", "xattr,name=systemd"},
		{"cgroup2", "rw,name=x", "name=x"},
	} {
		if got := cgroupOpts(mountEntry{point: "/sys/fs/cgroup/x", fstype: c.fstype, superOpts: c.super}); got != c.want {
			t.Errorf("cgroupOpts(%s %q) = %q, want %q", c.fstype, c.super, got, c.want)
		}
	}
}

func TestInNamespaceKill(t *testing.T) {
	for _, c := range []struct {
		kill string
		v2   []string
		want string
	}{
		{"/sys/fs/cgroup/kernpool/k1/cgroup.kill", []string{"/sys/fs/cgroup"}, "/sys/fs/cgroup/cgroup.kill"},
		{"/sys/fs/cgroup/unified/kp/k2/cgroup.kill", []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"}, "/sys/fs/cgroup/unified/cgroup.kill"},
		{"/sys/fs/cgroupx/k/cgroup.kill", []string{"/sys/fs/cgroup"}, ""},
		{"/sys/fs/cgroup/k/cgroup.kill", nil, ""},
		{"", []string{"/sys/fs/cgroup"}, ""},
	} {
		if got := inNamespaceKill(c.kill, c.v2); got != c.want {
			t.Errorf("inNamespaceKill(%q, %q) = %q, want %q", c.kill, c.v2, got, c.want)
		}
	}
}

// realTemp is a temporary directory by its resolved path.
func realTemp(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdirs(t *testing.T, base string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPlacedIn(t *testing.T) {
	root := realTemp(t)
	mkdirs(t, root, "cpu,cpuacct/kp/k1", "memory/kp/k1")
	if err := os.Symlink("cpu,cpuacct", filepath.Join(root, "cpu")); err != nil {
		t.Fatal(err)
	}
	viaLink := []string{filepath.Join(root, "cpu/kp/k1/cgroup.procs")}
	for _, c := range []struct {
		point  string
		placed []string
		want   bool
	}{
		{root + "/cpu,cpuacct", viaLink, true},
		{root + "/memory", viaLink, false},
		{root + "/memory", []string{root + "/memory/kp/k1/cgroup.procs"}, true},
		{root + "/cpu,cpuacct", nil, false},
		{root + "/cpu,cpu", viaLink, false},
	} {
		if got := placedIn(c.point, c.placed); got != c.want {
			t.Errorf("placedIn(%s, %q) = %v, want %v", c.point, c.placed, got, c.want)
		}
	}
}

func TestOutside(t *testing.T) {
	got := outside([]string{"/tmp/a", "/var/tmp", "/tmpx", "/run/lock", "/tmp"}, []string{"/tmp", "/var/tmp"})
	if want := []string{"/tmpx", "/run/lock"}; !slices.Equal(got, want) {
		t.Fatalf("outside = %q, want %q", got, want)
	}
}

func TestMaskedDirs(t *testing.T) {
	base := realTemp(t)
	mkdirs(t, base, "a/b", "c")
	if err := os.Symlink("a", filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := maskedDirs([]string{base + "/a/b", base + "/link", base + "/missing", base + "/c"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got) // dirs of one length cannot nest: their order is free
	if want := []string{base + "/a", base + "/c"}; !slices.Equal(got, want) {
		t.Fatalf("maskedDirs = %q, want %q", got, want)
	}
	if err := os.WriteFile(base+"/file", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := maskedDirs([]string{base + "/c", base + "/file/x"}); err == nil || !strings.Contains(err.Error(), "resolve "+base+"/file/x") {
		t.Fatalf("maskedDirs through a file = %q, %v; want a resolve error", got, err)
	}
}

func TestOpenKept(t *testing.T) {
	base := realTemp(t)
	m := base + "/m"
	mkdirs(t, base, "m/k1/inner", "m/k2", "other")
	if err := os.Symlink("k2", m+"/lnk"); err != nil {
		t.Fatal(err)
	}
	kept, err := openKept([]string{"", m + "/k1/inner", m + "/k1", m, base + "/other", m + "/lnk"}, []string{m})
	t.Cleanup(func() {
		for _, k := range kept {
			unix.Close(k.fd)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, k := range kept {
		paths = append(paths, k.path)
		var byFD, byPath unix.Stat_t
		if err := unix.Fstat(k.fd, &byFD); err != nil {
			t.Fatalf("fd of %s: %v", k.path, err)
		}
		if err := unix.Stat(k.path, &byPath); err != nil {
			t.Fatal(err)
		}
		if byFD.Ino != byPath.Ino || byFD.Dev != byPath.Dev {
			t.Fatalf("fd of %s is another directory", k.path)
		}
	}
	slices.Sort(paths)
	if want := []string{m + "/k1", m + "/k2"}; !slices.Equal(paths, want) {
		t.Fatalf("kept %q, want %q", paths, want)
	}
	if _, err := openKept([]string{m + "/gone"}, []string{m}); err == nil || !strings.Contains(err.Error(), "resolve "+m+"/gone") {
		t.Fatalf("openKept of a missing dir: %v, want a resolve error", err)
	}
}

func TestRequireNamespaces(t *testing.T) {
	all := []string{"mnt", "pid", "ipc", "uts", "net"}
	for _, c := range []struct {
		name    string
		own     []string
		hostNet bool
		want    string
	}{
		{"no net namespace", []string{"mnt", "pid", "ipc", "uts"}, false, "not in a net namespace"},
		{"no ipc namespace", []string{"mnt", "pid", "uts", "net"}, false, "not in a ipc namespace"},
		{"no mnt namespace, host network", []string{"pid", "ipc", "uts"}, true, "not in a mnt namespace"},
		{"none", nil, true, "not in a mnt namespace"},
		// Every namespace, but this test is not pid 1 of a new pid namespace.
		{"all, not pid 1", all, false, "want 1 in a new pid namespace"},
		{"host network, not pid 1", []string{"mnt", "pid", "ipc", "uts"}, true, "want 1 in a new pid namespace"},
	} {
		err := requireNamespaces(c.own, c.hostNet)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: requireNamespaces = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestReadMounts reads this process's real mount table: its root and its
// /proc (a proc filesystem) are there, with their super options.
func TestReadMounts(t *testing.T) {
	mounts, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, m := range mounts {
		if m.fstype == "" || m.superOpts == "" {
			t.Fatalf("mount %+v lacks its type or options", m)
		}
		if m.point == "/" || m.point == "/proc" && m.fstype == "proc" {
			found[m.point] = true
		}
	}
	if !found["/"] || !found["/proc"] {
		t.Fatalf("readMounts: / found %v, /proc (proc) found %v among %d mounts", found["/"], found["/proc"], len(mounts))
	}
}
