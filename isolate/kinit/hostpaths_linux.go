package kinit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	point, fstype, superOpts string
}

// readMounts parses /proc/self/mountinfo (read before /proc is replaced).
func readMounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 3 {
			continue
		}
		out = append(out, mountEntry{point: unescapeMount(a[4]), fstype: b[0], superOpts: b[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupRoot is where the host mounts its cgroup filesystems.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupNamespace moves the init into a cgroup namespace rooted at the
// groups it was placed in (the kernel's own) and mounts the cgroup
// filesystems again under /sys/fs/cgroup: the new mounts show only the
// kernel's group, so no other kernel's id or usage is visible there. A v1
// hierarchy the kernel was not placed in (placed: its cgroup.procs files)
// is left out: its root would be the daemon's group. It returns the
// in-namespace path of killFile ("" when there is none).
func cgroupNamespace(mounts []mountEntry, killFile string, placed []string) (string, error) {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return "", fmt.Errorf("cgroup namespace: %w", err)
	}
	var cg []mountEntry
	var top *mountEntry
	for i, m := range mounts {
		switch {
		case m.point == cgroupRoot:
			top = &mounts[i] // the last mount there is the visible one
		case strings.HasPrefix(m.point, cgroupRoot+"/") && (m.fstype == "cgroup2" || m.fstype == "cgroup" && placedIn(m.point, placed)):
			cg = append(cg, m)
		}
	}
	if top == nil {
		return "", nil // no cgroup filesystem to hide
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if top.fstype == "cgroup2" {
		// Linux refuses (EBUSY) a filesystem mounted on the root of a
		// mount of the same superblock, and cgroup2 has one superblock:
		// the new mount goes on a tmpfs laid over the host's first.
		if err := unix.Mount("tmpfs", cgroupRoot, "tmpfs", flags|unix.MS_RDONLY, "mode=0555,size=4k,nr_inodes=16"); err != nil {
			return "", fmt.Errorf("cgroup namespace: mount tmpfs: %w", err)
		}
		if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", flags, ""); err != nil {
			return "", fmt.Errorf("cgroup namespace: mount cgroup2: %w", err)
		}
		return inNamespaceKill(killFile, []string{cgroupRoot}), nil
	}
	links, err := cgroupLinks()
	if err != nil {
		return "", err
	}
	if err := unix.Mount("tmpfs", cgroupRoot, "tmpfs", flags, "mode=0755,size=64k,nr_inodes=256"); err != nil {
		return "", fmt.Errorf("cgroup namespace: mount tmpfs: %w", err)
	}
	var v2 []string
	for _, m := range cg {
		if err := os.MkdirAll(m.point, 0o755); err != nil {
			return "", fmt.Errorf("cgroup namespace: %w", err)
		}
		if err := unix.Mount("cgroup", m.point, m.fstype, flags, cgroupOpts(m)); err != nil {
			return "", fmt.Errorf("cgroup namespace: mount %s: %w", m.point, err)
		}
		if m.fstype == "cgroup2" {
			v2 = append(v2, m.point)
		}
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(cgroupRoot, name)); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("cgroup namespace: %w", err)
		}
	}
	if err := unix.Mount("", cgroupRoot, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, ""); err != nil {
		return "", fmt.Errorf("cgroup namespace: remount read-only: %w", err)
	}
	return inNamespaceKill(killFile, v2), nil
}

// placedIn says whether one of the cgroup.procs files the init wrote lies
// in the hierarchy mounted at point (names resolved: cpu may be a link to
// cpu,cpuacct).
func placedIn(point string, placed []string) bool {
	for _, p := range placed {
		dir := filepath.Dir(p)
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
		}
		if strings.HasPrefix(dir, point+"/") {
			return true
		}
	}
	return false
}

// cgroupOpts are a hierarchy's mount options: its super options without
// rw/ro, and without nsdelegate (only the initial namespace may set it).
func cgroupOpts(m mountEntry) string {
	var keep []string
	for _, o := range strings.Split(m.superOpts, ",") {
		if o != "rw" && o != "ro" && o != "nsdelegate" && o != "" {
			keep = append(keep, o)
		}
	}
	if m.fstype == "cgroup" && len(keep) == 1 && strings.HasPrefix(keep[0], "name=") {
		keep = append([]string{"none"}, keep...)
	}
	return strings.Join(keep, ",")
}

// cgroupLinks are the symlinks directly in /sys/fs/cgroup (cpu ->
// cpu,cpuacct on some hosts).
func cgroupLinks() (map[string]string, error) {
	ents, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("cgroup namespace: %w", err)
	}
	links := map[string]string{}
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(filepath.Join(cgroupRoot, e.Name())); err == nil {
				links[e.Name()] = t
			}
		}
	}
	return links, nil
}

// inNamespaceKill maps the daemon's path of the kernel's cgroup.kill to
// the namespace's: the cgroup2 mount's root is the kernel's group now.
func inNamespaceKill(killFile string, v2 []string) string {
	for _, p := range v2 {
		if strings.HasPrefix(killFile, p+"/") {
			return p + "/cgroup.kill"
		}
	}
	return ""
}

// privatePts mounts a devpts instance of the kernel's own over /dev/pts
// (at most max ptys, counted apart from the host's reserve) and points
// /dev/ptmx at it: a kernel cannot take the host's ptys.
func privatePts(max int) error {
	opts := "newinstance,ptmxmode=0666,mode=0620,max=" + strconv.Itoa(max)
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount devpts on /dev/pts: %w", err)
	}
	if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /dev/pts/ptmx on /dev/ptmx: %w", err)
	}
	return nil
}

// privateMqueue mounts the kernel's IPC namespace's mqueue filesystem
// wherever the host has one mounted (/dev/mqueue): the host's queues are
// not reachable by path.
func privateMqueue(mounts []mountEntry) error {
	done := map[string]bool{}
	for _, m := range mounts {
		if m.fstype != "mqueue" || done[m.point] {
			continue
		}
		done[m.point] = true
		if err := unix.Mount("mqueue", m.point, "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount mqueue on %s: %w", m.point, err)
		}
	}
	return nil
}

// readOnly binds each dir onto itself read-only (submounts stay as they
// are); a dir that no longer exists is skipped.
func readOnly(dirs []string) error {
	for _, d := range dirs {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return fmt.Errorf("read-only %s: %w", d, err)
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("read-only %s: bind: %w", d, err)
		}
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		for _, f := range []struct{ st, ms uintptr }{
			{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		} {
			if uintptr(st.Flags)&f.st != 0 {
				flags |= f.ms
			}
		}
		if err := unix.Mount("", d, "", flags, ""); err != nil {
			return fmt.Errorf("read-only %s: remount: %w", d, err)
		}
	}
	return nil
}

// hideOthers removes from the kernel's mount table every mount below hide
// (other kernels' staging dirs) except staging and what lies beneath it:
// their paths name other tenants. mounts is the table as the init found
// it (the cgroup mounts made since lie elsewhere).
func hideOthers(mounts []mountEntry, hide, staging string) error {
	if hide == "" {
		return nil
	}
	var points []string
	for _, m := range mounts {
		if strings.HasPrefix(m.point, hide+"/") && m.point != staging && !strings.HasPrefix(m.point, staging+"/") {
			points = append(points, m.point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		err := unix.Unmount(p, unix.MNT_DETACH)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	return nil
}
