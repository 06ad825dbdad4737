package kinit

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"golang.org/x/sys/unix"
)

// inMountNS runs f on a thread of its own in a private copy of this
// process's mount namespace: the init's mount steps run there for real and
// vanish with the thread (the goroutine never unlocks it, so the runtime
// ends the thread).
func inMountNS(t *testing.T, f func() error) {
	t.Helper()
	testenv.RequireRoot(t)
	err := offMainThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make private: %w", err)
		}
		return f()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// offMainThread runs f locked to a thread that is not the process's main
// one and never unlocks it. The runtime cannot end the main thread (it
// parks it instead), and /proc/self, which the other tests read, shows the
// main thread's namespaces: a goroutine that finds itself there holds it
// while another one does the work.
func offMainThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			err := offMainThread(f) // cannot land here: this thread is taken
			runtime.UnlockOSThread()
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// threadMounts counts this thread's mounts by mount point (mountinfo's
// fifth field; the test paths need no unescaping).
func threadMounts() (map[string]int, error) {
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			n[f[4]]++
		}
	}
	return n, nil
}

func tmpfsAt(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=64k"); err != nil {
			return fmt.Errorf("mount %s: %w", d, err)
		}
	}
	return nil
}

// TestHideOthers: every mount below hide goes but the kernel's own staging
// dir and what lies beneath it; mounts elsewhere and at hide itself stay.
func TestHideOthers(t *testing.T) {
	base := realTemp(t)
	hide, mine := base+"/staging", base+"/staging/mine"
	inMountNS(t, func() error {
		stay := []string{hide, mine, mine + "/inner", base + "/other"}
		gone := []string{hide + "/k1", hide + "/k2", hide + "/k2/sub", hide + "/mine2"}
		if err := tmpfsAt(append(stay[:1:1], append(gone, stay[1:]...)...)...); err != nil {
			return err
		}
		var entries []mountEntry
		for _, p := range append(append(gone, stay...), hide+"/never-mounted") {
			entries = append(entries, mountEntry{point: p, fstype: "tmpfs"})
		}
		if err := hideOthers(entries, "", mine); err != nil {
			return fmt.Errorf("hideOthers with no hide dir: %w", err)
		}
		if n, _ := threadMounts(); n[hide+"/k1"] != 1 {
			return fmt.Errorf("no hide dir: %s has %d mounts, want 1 (nothing removed)", hide+"/k1", n[hide+"/k1"])
		}
		if err := hideOthers(entries, hide, mine); err != nil {
			return fmt.Errorf("hideOthers: %w", err)
		}
		n, err := threadMounts()
		if err != nil {
			return err
		}
		for _, p := range stay {
			if n[p] != 1 {
				return fmt.Errorf("%s has %d mounts after hideOthers, want 1", p, n[p])
			}
		}
		for _, p := range gone {
			if n[p] != 0 {
				return fmt.Errorf("%s has %d mounts after hideOthers, want 0", p, n[p])
			}
		}
		return nil
	})
}

// TestReadOnly: a dir is bound read-only keeping its own nosuid, nodev and
// noexec and gaining none; a missing dir is skipped, a path through a file
// is an error.
func TestReadOnly(t *testing.T) {
	base := realTemp(t)
	all, some := base+"/all", base+"/some"
	inMountNS(t, func() error {
		if err := os.MkdirAll(all, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(some, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", all, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k"); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", some, "tmpfs", unix.MS_NOSUID, "size=64k"); err != nil {
			return err
		}
		if err := readOnly([]string{all, base + "/missing", some}); err != nil {
			return fmt.Errorf("readOnly: %w", err)
		}
		for dir, want := range map[string]int64{
			all:  unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC,
			some: unix.ST_RDONLY | unix.ST_NOSUID,
		} {
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil {
				return err
			}
			const mask = unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC
			if got := st.Flags & mask; got != want {
				return fmt.Errorf("%s flags %#x after readOnly, want %#x", dir, got, want)
			}
			if err := os.WriteFile(dir+"/f", nil, 0o600); !errors.Is(err, unix.EROFS) {
				return fmt.Errorf("write in %s after readOnly: %v, want EROFS", dir, err)
			}
		}
		if err := os.WriteFile(base+"/file", nil, 0o600); err != nil {
			return err
		}
		if err := readOnly([]string{base + "/file/x"}); err == nil || !strings.Contains(err.Error(), "read-only "+base+"/file/x") {
			return fmt.Errorf("readOnly through a file: %v, want a read-only error", err)
		}
		return nil
	})
}

// TestPrivateMqueue: one mqueue mount at each point the host has one,
// none where the host has another filesystem.
func TestPrivateMqueue(t *testing.T) {
	base := realTemp(t)
	mq, other := base+"/mq", base+"/other"
	inMountNS(t, func() error {
		for _, d := range []string{mq, other} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		err := privateMqueue([]mountEntry{{point: mq, fstype: "mqueue"}, {point: other, fstype: "tmpfs"}, {point: mq, fstype: "mqueue"}})
		if err != nil {
			return err
		}
		n, err := threadMounts()
		if err != nil {
			return err
		}
		if n[mq] != 1 || n[other] != 0 {
			return fmt.Errorf("mounts: %d at %s, want 1; %d at %s, want 0", n[mq], mq, n[other], other)
		}
		var st unix.Statfs_t
		if err := unix.Statfs(mq, &st); err != nil {
			return err
		}
		const mqueueMagic = 0x19800202
		if st.Type != mqueueMagic {
			return fmt.Errorf("%s is filesystem %#x, want mqueue", mq, st.Type)
		}
		return nil
	})
}

// TestBindBack: a kept dir shows through the private tmpfs at its path,
// under parents only root may list; a world-writable one is read-only, any
// other stays writable.
func TestBindBack(t *testing.T) {
	base := realTemp(t)
	inMountNS(t, func() error {
		var kept []keptDir
		for _, c := range []struct {
			name string
			mode os.FileMode
		}{{"shared", 0o777}, {"own", 0o755}} {
			d := base + "/mask/a/" + c.name
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(d, c.mode); err != nil {
				return err
			}
			if err := os.WriteFile(d+"/seen", []byte(c.name), 0o600); err != nil {
				return err
			}
			fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			kept = append(kept, keptDir{path: d, fd: fd})
		}
		if err := unix.Mount("tmpfs", base+"/mask", "tmpfs", 0, "size=64k,mode=1777"); err != nil {
			return err
		}
		for _, k := range kept {
			if err := bindBack(k); err != nil {
				return fmt.Errorf("bindBack: %w", err)
			}
			b, err := os.ReadFile(k.path + "/seen")
			if err != nil || !slices.Contains([]string{"shared", "own"}, string(b)) {
				return fmt.Errorf("%s/seen after bindBack: %q, %v", k.path, b, err)
			}
		}
		fi, err := os.Stat(base + "/mask/a")
		if err != nil {
			return err
		}
		if fi.Mode().Perm() != 0o711 {
			return fmt.Errorf("parent made for the bind has mode %o, want 711", fi.Mode().Perm())
		}
		if err := os.WriteFile(base+"/mask/a/shared/w", nil, 0o600); !errors.Is(err, unix.EROFS) {
			return fmt.Errorf("write in the world-writable kept dir: %v, want EROFS", err)
		}
		if err := os.WriteFile(base+"/mask/a/own/w", nil, 0o600); err != nil {
			return fmt.Errorf("write in the kept dir: %v, want it writable", err)
		}
		return nil
	})
}

// TestSetupMountsScratch: the private scratch mounts the init lays over
// /tmp, /var/tmp and /dev/shm are tmpfs of the configured size and inode
// count, nosuid and nodev, and /dev/shm alone is also noexec.
func TestSetupMountsScratch(t *testing.T) {
	inMountNS(t, func() error {
		if _, err := setupMounts(Config{BaseMounts: true, TmpSize: 2 << 20}); err != nil {
			return fmt.Errorf("setupMounts: %w", err)
		}
		const mask = unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC
		for dir, want := range map[string]int64{
			"/tmp":     unix.ST_NOSUID | unix.ST_NODEV,
			"/var/tmp": unix.ST_NOSUID | unix.ST_NODEV,
			"/dev/shm": unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC,
		} {
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil {
				return err
			}
			const tmpfsMagic = 0x01021994
			if st.Type != tmpfsMagic || st.Flags&mask != want || st.Blocks*uint64(st.Bsize) != 2<<20 || st.Files != 1024 {
				return fmt.Errorf("%s: type %#x flags %#x (want %#x) size %d (want %d) inodes %d (want 1024)",
					dir, st.Type, st.Flags&mask, want, st.Blocks*uint64(st.Bsize), 2<<20, st.Files)
			}
		}
		return nil
	})
}
