package kinit

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCgroupNamespaceView: on a host whose /sys/fs/cgroup is a tmpfs of
// hierarchies (v1 or hybrid), the init's view mounts again the cgroup2
// hierarchy and the v1 ones the kernel was placed in, and no other, keeps
// the host's links (net_cls -> net_cls,net_prio on some hosts), maps the kill file
// into the namespace and is read-only. The host's /sys/fs/cgroup is a
// stand-in tmpfs in a private mount namespace (the host here may have no
// links); the hierarchies mounted are the real ones.
func TestCgroupNamespaceView(t *testing.T) {
	host, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	var v1 []mountEntry // real v1 controller hierarchies
	for _, m := range host {
		if m.fstype == "cgroup" && strings.HasPrefix(m.point, cgroupRoot+"/") && !strings.Contains(m.superOpts, "name=") &&
			!strings.HasPrefix(m.point, cgroupRoot+"/net_cls") {
			v1 = append(v1, m)
		}
	}
	if len(v1) < 2 {
		t.Skipf("%d v1 controller hierarchies on this host, want 2 (the cgroup2-only view is isolate's tests')", len(v1))
	}
	placed, other := v1[0], v1[1]
	unified := mountEntry{point: cgroupRoot + "/unified", fstype: "cgroup2", superOpts: "rw,nsdelegate"}
	inMountNS(t, func() error {
		if err := tmpfsAt(cgroupRoot); err != nil {
			return err
		}
		if err := os.Symlink("net_cls,net_prio", cgroupRoot+"/net_cls"); err != nil {
			return err
		}
		if err := os.Mkdir(cgroupRoot+"/net_cls,net_prio", 0o755); err != nil {
			return err
		}
		want := map[string]string{"net_cls": "net_cls,net_prio"}
		if links, err := cgroupLinks(); err != nil || !maps.Equal(links, want) {
			return fmt.Errorf("cgroupLinks() = %v, %v; want %v", links, err, want)
		}
		mounts := []mountEntry{{point: cgroupRoot, fstype: "tmpfs"}, unified, placed, other}
		kill, err := cgroupNamespace(mounts, unified.point+"/kernpool/k1/cgroup.kill", []string{placed.point + "/kernpool/k1/cgroup.procs"})
		if err != nil {
			return err
		}
		if kill != unified.point+"/cgroup.kill" {
			return fmt.Errorf("kill file %q, want %q", kill, unified.point+"/cgroup.kill")
		}
		if l, err := os.Readlink(cgroupRoot + "/net_cls"); err != nil || l != "net_cls,net_prio" {
			return fmt.Errorf("link net_cls: %q, %v; want net_cls,net_prio", l, err)
		}
		for _, c := range []struct {
			point string
			magic int64
		}{{unified.point, unix.CGROUP2_SUPER_MAGIC}, {placed.point, unix.CGROUP_SUPER_MAGIC}} {
			var st unix.Statfs_t
			if err := unix.Statfs(c.point, &st); err != nil || st.Type != c.magic {
				return fmt.Errorf("%s: filesystem %#x, %v; want %#x", c.point, st.Type, err, c.magic)
			}
		}
		if _, err := os.Stat(other.point); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s, where the kernel was not placed: %v, want absent", other.point, err)
		}
		if err := os.Mkdir(cgroupRoot+"/x", 0o755); !errors.Is(err, unix.EROFS) {
			return fmt.Errorf("mkdir in the new view: %v, want EROFS", err)
		}
		return nil
	})
}

// TestCgroupNamespaceViewV2: where the host mounts cgroup2 on
// /sys/fs/cgroup itself, the init lays a tmpfs over it and mounts the
// namespace's cgroup2 there (Linux refuses cgroup2 straight on a cgroup2
// mount's root), and the kill file maps to that mount's root. The host's
// mount is a stand-in cgroup2 mount in a private mount namespace.
func TestCgroupNamespaceViewV2(t *testing.T) {
	inMountNS(t, func() error {
		if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("stand-in cgroup2 mount: %w", err)
		}
		before, err := threadMounts()
		if err != nil {
			return err
		}
		kill, err := cgroupNamespace([]mountEntry{{point: cgroupRoot, fstype: "cgroup2"}}, cgroupRoot+"/kernpool/k1/cgroup.kill", nil)
		if err != nil {
			return err
		}
		if kill != cgroupRoot+"/cgroup.kill" {
			return fmt.Errorf("kill file %q, want %q", kill, cgroupRoot+"/cgroup.kill")
		}
		after, err := threadMounts()
		if err != nil {
			return err
		}
		var st unix.Statfs_t
		if err := unix.Statfs(cgroupRoot, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			return fmt.Errorf("%s: filesystem %#x, %v; want cgroup2", cgroupRoot, st.Type, err)
		}
		if n := after[cgroupRoot] - before[cgroupRoot]; n != 2 {
			return fmt.Errorf("%d new mounts on %s, want 2 (a tmpfs, then cgroup2)", n, cgroupRoot)
		}
		return nil
	})
}
