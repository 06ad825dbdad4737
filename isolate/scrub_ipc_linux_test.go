package isolate

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/internal/testenv"
)

// onOwnThread runs fn on an OS thread of its own that first unshares the
// namespaces in flags: the test's IPC objects and mounts reach nothing
// else on the host, and no concurrent test reaches them. The thread is
// never unlocked, so it dies with its goroutine and nothing else runs in
// its namespaces or with the credentials fn gave it.
func onOwnThread(flags int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(flags); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		if flags&unix.CLONE_NEWNS != 0 {
			// A private copy: the thread's mounts must not reach the host's.
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				errc <- fmt.Errorf("make / private: %w", err)
				return
			}
		}
		errc <- fn()
	}()
	return <-errc
}

// asEUID runs fn with this thread's effective uid set to uid (the real and
// saved uids stay 0, so root comes back after): the objects fn creates
// have uid as their creator. Only for a thread of onOwnThread.
func asEUID(uid int, fn func() error) error {
	const keep = ^uintptr(0) // -1: leave that id as it is
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
		return fmt.Errorf("seteuid %d: %w", uid, e)
	}
	err := fn()
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep); e != 0 {
		return errors.Join(err, fmt.Errorf("seteuid 0: %w", e))
	}
	return err
}

type ipcKind string

const (
	shm ipcKind = "shm"
	msg ipcKind = "msg"
	sem ipcKind = "sem"
)

// ipcObject is one SysV object a test made.
type ipcObject struct {
	kind ipcKind
	id   int
}

func newIPC(kind ipcKind) (ipcObject, error) {
	var id uintptr
	var e unix.Errno
	switch kind {
	case shm:
		n, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
		return ipcObject{shm, n}, err
	case msg:
		id, _, e = unix.Syscall(unix.SYS_MSGGET, unix.IPC_PRIVATE, unix.IPC_CREAT|0o600, 0)
	case sem:
		id, _, e = unix.Syscall(unix.SYS_SEMGET, unix.IPC_PRIVATE, 1, unix.IPC_CREAT|0o600)
	}
	if e != 0 {
		return ipcObject{}, fmt.Errorf("create sysv %s: %w", kind, e)
	}
	return ipcObject{kind, int(id)}, nil
}

// exists says whether the object is still there (IPC_STAT as root).
func (o ipcObject) exists() (bool, error) {
	var buf [512]byte // larger than any of shmid_ds, msqid_ds, semid_ds
	var e unix.Errno
	switch o.kind {
	case shm:
		_, _, e = unix.Syscall(unix.SYS_SHMCTL, uintptr(o.id), unix.IPC_STAT, uintptr(unsafe.Pointer(&buf)))
	case msg:
		_, _, e = unix.Syscall(unix.SYS_MSGCTL, uintptr(o.id), unix.IPC_STAT, uintptr(unsafe.Pointer(&buf)))
	case sem:
		_, _, e = unix.Syscall6(unix.SYS_SEMCTL, uintptr(o.id), 0, unix.IPC_STAT, uintptr(unsafe.Pointer(&buf)), 0, 0)
	}
	switch {
	case e == 0:
		return true, nil
	case e == unix.EINVAL || e == unix.EIDRM:
		return false, nil
	}
	return false, fmt.Errorf("stat sysv %s %d: %w", o.kind, o.id, e)
}

// giveShm makes uid the owner of a shared memory segment (its creator
// stays).
func giveShm(id, uid int) error {
	var d unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &d); err != nil {
		return err
	}
	d.Perm.Uid = uint32(uid)
	_, err := unix.SysvShmCtl(id, unix.IPC_SET, &d)
	return err
}

// A scrub removes every SysV object the uid owns or created, of each kind,
// and nothing of another uid's: in an IPC namespace of the test's own,
// a segment root gave the uid, one the uid created and gave away, a queue
// and a semaphore set the uid created go; another uid's segment and
// root's queue and set stay, and the scrub reports no error.
func TestScrubRemovesTheUIDsIPCObjectsOnly(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other = 61960, 61961
	err := onOwnThread(unix.CLONE_NEWIPC, func() error {
		var mine, theirs []ipcObject
		add := func(kind ipcKind, into *[]ipcObject) (ipcObject, error) {
			o, err := newIPC(kind)
			if err == nil {
				*into = append(*into, o)
			}
			return o, err
		}
		given, err := add(shm, &mine)
		if err == nil {
			err = giveShm(given.id, uid) // uid owns it, root created it
		}
		if err != nil {
			return err
		}
		if err := asEUID(uid, func() error {
			for _, k := range []ipcKind{shm, msg, sem} {
				if _, err := add(k, &mine); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if err := giveShm(mine[1].id, other); err != nil { // the uid created it, other owns it
			return err
		}
		kept, err := add(shm, &theirs)
		if err == nil {
			err = giveShm(kept.id, other)
		}
		for _, k := range []ipcKind{msg, sem} {
			if err == nil {
				_, err = add(k, &theirs)
			}
		}
		if err != nil {
			return err
		}

		// What the tables list of uid's, before the scrub: 2 segments, 1
		// queue, 1 set.
		want := map[ipcKind][]int{shm: {mine[0].id, mine[1].id}, msg: {mine[2].id}, sem: {mine[3].id}}
		var errs []error
		for k, ids := range want {
			got, err := ipcIDs("/proc/sysvipc/"+string(k), uid)
			slices.Sort(got)
			slices.Sort(ids)
			if err != nil || !slices.Equal(got, ids) {
				errs = append(errs, fmt.Errorf("ipcIDs(%s) = %v, %v; want %v", k, got, err, ids))
			}
		}
		if res, err := scrubUID(nil, uid); err != nil || res != (scrubResult{}) {
			errs = append(errs, fmt.Errorf("scrub = %+v, %v; want no error (IPC objects are not entries)", res, err))
		}
		for _, c := range []struct {
			objs []ipcObject
			want bool
		}{{mine, false}, {theirs, true}} {
			for _, o := range c.objs {
				if ok, err := o.exists(); err != nil || ok != c.want {
					errs = append(errs, fmt.Errorf("sysv %s %d exists = %v, %v after the scrub; want %v", o.kind, o.id, ok, err, c.want))
				}
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The tables are read by the columns their header names, shm's, msg's and
// sem's differing; a row too short to hold every named column is skipped
// (it cannot say whose object it is), one that just holds them is read.
func TestIPCIDsReadsTheColumnsTheHeaderNames(t *testing.T) {
	const uid = 61962
	// Headers as Linux 6 writes them. Ids 1x, 2x, 3x are uid's (as owner
	// or as creator), 9x another's or cut short: shm's 92 and sem's 95
	// end one field before cuid, shm's 12 ends at it.
	cases := []struct {
		name, table string
		want        []int
	}{
		{"shm", `       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap
         0         10   600                  4096   100   100      0 61962     0     0     0          0          0 1700000000                     0                     0
         0         11   600                  4096   100   100      0 61963     0 61962     0          0          0 1700000000                     0                     0
         0         90   600                  4096   100   100      0 61963     0 61964     0          0          0 1700000000                     0                     0
         0         91   600                  4096   100   100      0 61963     0     0     0          0          0 1700000000                     0                     0
         0         92   600                  4096   100   100      0 61962     0
         0         12   600                  4096   100   100      0 61962     0     0
`, []int{10, 11, 12}},
		{"msg", `       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime
         0         20   600           0          0     0     0 61962     0     0     0          0          0 1700000000
         0         21   600           0          0     0     0     0     0 61962     0          0          0 1700000000
         0         93   600           0          0     0     0 61963     0 61964     0          0          0 1700000000
`, []int{20, 21}},
		{"sem", `       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime
         0         30   600          1 61962     0     0     0          0 1700000000
         0         31   600          1     0     0 61962     0          0 1700000000
         0         94   600          1 61963     0 61963     0          0 1700000000
         0         95   600          1 61962     0
`, []int{30, 31}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name)
			if err := os.WriteFile(path, []byte(c.table), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ipcIDs(path, uid)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("ipcIDs = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// SysV objects are the other half of a uid's leftovers: a scrub that
// cannot read the IPC tables cannot know they are gone, and must count as
// failed (the uid retires until it is clean) rather than pass. On a thread
// with a mount namespace of its own, /proc/sysvipc/shm is a table no
// scanner reads (a line past bufio's 64 KiB).
func TestScrubFailsWhenIPCTablesCannotBeRead(t *testing.T) {
	testenv.RequireRoot(t)
	table := filepath.Join(t.TempDir(), "shm")
	long := make([]byte, 70<<10)
	for i := range long {
		long[i] = 'x'
	}
	if err := os.WriteFile(table, append(long, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	var scrubErr error
	err := onOwnThread(unix.CLONE_NEWNS, func() error {
		if err := unix.Mount(table, "/proc/sysvipc/shm", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind a table over /proc/sysvipc/shm: %w", err)
		}
		_, scrubErr = scrubUID(nil, 61990)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !scrubFailed(scrubErr) || !errors.Is(scrubErr, bufio.ErrTooLong) {
		t.Errorf("scrub with an unreadable /proc/sysvipc/shm = %v (failed %v); want it failed with %q", scrubErr, scrubFailed(scrubErr), bufio.ErrTooLong)
	}
}
