package isolate

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// idFiles are the user and group databases a uid range must not overlap.
var idFiles = []string{"/etc/passwd", "/etc/group"}

// rangeEntries lists the entries of files (idFiles) inside [first, last].
func rangeEntries(files []string, first, last int) []string {
	var hits []string
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) < 3 {
				continue
			}
			if id, err := strconv.Atoi(fields[2]); err == nil && id >= first && id <= last {
				hits = append(hits, fmt.Sprintf("%s %s (%d)", file, fields[0], id))
			}
		}
		f.Close()
	}
	return hits
}

// procUIDs maps the real uid of every live process to its pids. Zombies
// are skipped: they run nothing and hold no uid's rights.
func procUIDs() map[int][]int {
	out := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uid, ok := procUID(pid); ok {
			out[uid] = append(out[uid], pid)
		}
	}
	return out
}

// procUID reads the real uid of a live (not zombie) pid from /proc/<pid>/status.
func procUID(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(rest), "Z") {
			return 0, false
		}
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				uid, err := strconv.Atoi(f[0])
				return uid, err == nil
			}
		}
	}
	return 0, false
}

// killUID SIGKILLs every process whose real uid is uid, repeating until
// none is left or passes run out. Only for uids the pool owns exclusively
// (one per live kernel, from a range without passwd entries).
func killUID(uid int) int {
	killed := 0
	for pass := 0; pass < 20; pass++ {
		pids := procUIDs()[uid]
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	return killed
}

// chownTree gives the staging tree to the kernel's uid.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// canUse checks, from mode bits, that uid/gid (no supplementary groups)
// can reach path and use it: exec for a file, search for a directory. ACLs
// and LSMs are not evaluated; the kernel start reports those.
func canUse(path string, uid, gid int, dir bool) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: %w: not an absolute path", path, ErrAccess)
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w: does not exist", path, ErrAccess)
	}
	if err != nil {
		return fmt.Errorf("%s: %w: %v", path, ErrAccess, err)
	}
	// Both the named path's directories and the resolved ones are traversed.
	for _, p := range []string{filepath.Dir(path), filepath.Dir(real)} {
		for d := p; ; d = filepath.Dir(d) {
			if err := modeAllows(d, uid, gid, 1); err != nil {
				return err
			}
			if d == "/" {
				break
			}
		}
	}
	st, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", path, ErrAccess, err)
	}
	if dir != st.IsDir() {
		want := "a regular file"
		if dir {
			want = "a directory"
		}
		return fmt.Errorf("%s: %w: not %s", path, ErrAccess, want)
	}
	return modeAllows(real, uid, gid, 1)
}

// modeAllows checks one permission bit (1 = x) for uid/gid on path.
func modeAllows(path string, uid, gid int, bit uint32) error {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w: does not exist", path, ErrAccess)
		}
		return fmt.Errorf("%s: %w: %v", path, ErrAccess, err)
	}
	perm := st.Mode & 0o7
	switch {
	case int(st.Uid) == uid:
		perm = (st.Mode >> 6) & 0o7
	case int(st.Gid) == gid:
		perm = (st.Mode >> 3) & 0o7
	}
	if perm&bit == 0 {
		what := "search"
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			what = "execute"
		}
		return fmt.Errorf("%w: uid %d cannot %s %s (mode %04o, owner %d:%d; to let kernels through, run: chmod o+x %s)",
			ErrAccess, uid, what, path, st.Mode&0o7777, st.Uid, st.Gid, path)
	}
	return nil
}
