package isolate

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
)

// deniedCall is one syscall a kernel must not make, tried for real from a
// cell. The list is written by hand from docs/design.md ("What a hostile
// kernel might try", "Host-wide pools"), not from DeniedSyscalls or the
// filter, and the numbers are x86-64's (arch/x86/entry/syscalls/
// syscall_64.tbl), so a rule dropped from the filter or a name the
// policy compiler maps elsewhere shows here.
type deniedCall struct {
	name string
	nr   int
	args string // Python arguments after the number (see deniedPrelude)
	want string // errno name the kernel must get
	// without is what an unprivileged process gets from the same call with
	// no filter (uid 65534, no capabilities, Linux 6.18): arguments are
	// chosen so that it differs from want wherever the filter alone denies,
	// so the row fails when its rule goes. "caps" rows are denied twice
	// (seccomp and no capability) and stay EPERM without the rule.
	without string
}

// deniedCalls: N is NULL, S(...) a C string, P the kernel's own pid.
var deniedCalls = []deniedCall{
	// Keyrings: a cell could reach the session keyring and its quota.
	{"keyctl", 250, "0, -3, 0", "EPERM", "allowed"}, // KEYCTL_GET_KEYRING_ID(session)
	{"add_key", 248, "N, S('k'), N, 0, -3", "EPERM", "EFAULT"},
	{"request_key", 249, "N, N, N, 0", "EPERM", "EFAULT"},
	// eBPF, perf, userfaultfd, io_uring: most recent kernel LPEs.
	{"bpf", 321, "5, N, 0", "EPERM", "caps (unprivileged_bpf_disabled)"},
	{"perf_event_open", 298, "N, 0, -1, -1, 0", "EPERM", "EFAULT"},
	{"userfaultfd", 323, "1 | 0x40000000", "EPERM", "EINVAL"}, // UFFD_USER_MODE_ONLY and a bad flag
	{"io_uring_setup", 425, "1, N", "EPERM", "EFAULT"},
	{"io_uring_enter", 426, "-1, 0, 0, 0, N, 0", "EPERM", "EBADF"},
	{"io_uring_register", 427, "-1, 0, N, 0", "EPERM", "EINVAL"},
	// Kexec and modules.
	{"kexec_load", 246, "0, 0, N, 0", "EPERM", "caps (ENOSYS without kexec)"},
	{"kexec_file_load", 320, "-1, -1, 0, N, 0", "EPERM", "caps (ENOSYS without kexec)"},
	{"init_module", 175, "N, 0, S('')", "EPERM", "caps (ENOSYS without modules)"},
	{"finit_module", 313, "-1, S(''), 0", "EPERM", "caps (ENOSYS without modules)"},
	{"delete_module", 176, "S('kp_none'), 0", "EPERM", "caps (ENOSYS without modules)"},
	// Mounts and namespace switches: ways out of the sandbox.
	{"mount", 165, "N, S('/nonexistent-kp'), N, 0, N", "EPERM", "ENOENT"},
	{"umount2", 166, "S('/'), 0x80000000", "EPERM", "EINVAL"},
	{"pivot_root", 155, "S('/nonexistent-kp'), S('/nonexistent-kp')", "EPERM", "caps"},
	{"chroot", 161, "S('/nonexistent-kp')", "EPERM", "ENOENT"},
	{"setns", 308, "-1, 0", "EPERM", "EBADF"},
	{"open_tree", 428, "-100, S('/nonexistent-kp'), 0", "EPERM", "ENOENT"},
	{"move_mount", 429, "-1, S(''), -1, S(''), 0x80000000", "EPERM", "caps"},
	{"fsopen", 430, "N, 0", "EPERM", "caps"},
	{"fsconfig", 431, "-1, 0, N, N, 0", "EPERM", "EINVAL"},
	{"fsmount", 432, "-1, 0x80000000, 0", "EPERM", "caps"},
	{"fspick", 433, "-1, N, 0x80000000", "EPERM", "caps"},
	{"mount_setattr", 442, "-1, N, 0, N, 0", "EPERM", "EINVAL"},
	{"open_by_handle_at", 304, "-1, N, 0", "EPERM", "EFAULT"},
	{"name_to_handle_at", 303, "-100, S('/nonexistent-kp'), N, N, 0", "EPERM", "ENOENT"},
	// A new user namespace: EINVAL (CLONE_FS with it) or a new one without.
	{"clone(CLONE_NEWUSER)", 56, "0x10000000 | 0x200, 0, 0, 0, 0", "EPERM", "EINVAL"},
	{"clone3", 435, "N, 0", "ENOSYS", "EINVAL"}, // flags in memory: libc falls back to clone
	// Other processes.
	{"ptrace", 101, "2, 999999, 0, 0", "EPERM", "ESRCH"}, // PTRACE_PEEKDATA
	{"process_vm_readv", 310, "P, N, 0, N, 0, 1", "EPERM", "EINVAL"},
	{"process_vm_writev", 311, "P, N, 0, N, 0, 1", "EPERM", "EINVAL"},
	// The host itself.
	{"acct", 163, "N", "EPERM", "caps"},
	{"swapon", 167, "N, 0", "EPERM", "caps"},
	{"swapoff", 168, "N", "EPERM", "caps"},
	{"reboot", 169, "0, 0, 0, N", "EPERM", "caps"},
	{"settimeofday", 164, "ctypes.byref(tv), N", "EPERM", "caps (not in the filter: no CAP_SYS_TIME)"},
	{"clock_settime", 227, "0, ctypes.byref(tv)", "EPERM", "caps (not in the filter: no CAP_SYS_TIME)"},
	// Host-wide pools: Linux AIO contexts (fs.aio-max-nr), fanotify
	// groups, memfd_secret pages, samepage merging opted into by a kernel.
	{"io_setup", 206, "1, N", "EPERM", "EFAULT"},
	{"io_destroy", 207, "0", "EPERM", "EINVAL"},
	{"io_getevents", 208, "0, 0, 0, N, N", "EPERM", "EINVAL"},
	{"io_submit", 209, "0, 0, N", "EPERM", "EINVAL"},
	{"io_cancel", 210, "0, N, N", "EPERM", "EFAULT"},
	{"io_pgetevents", 333, "0, 0, 0, N, N, N", "EPERM", "EINVAL"},
	{"fanotify_init", 300, "0x200 | 0x80000000, 0", "EPERM", "EINVAL"}, // FAN_REPORT_FID and a bad flag
	{"memfd_secret", 447, "0x80000000", "EPERM", "EINVAL"},
	{"prctl(PR_SET_MEMORY_MERGE)", 157, "67, 0, 0, 0, 0", "EPERM", "allowed"},
	{"madvise(MADV_MERGEABLE)", 28, "0, 0, 12", "EPERM", "allowed"},
	// The ABI guard: numbers past the native table, and x32's.
	{"number 1000", 1000, "", "EPERM", "ENOSYS"},
	{"x32 getpid", 0x40000000 | 39, "", "ENOSYS", "ENOSYS (no x32 here)"},
	// Last: without its rule it would leave the kernel in a new namespace.
	{"unshare(CLONE_NEWUSER)", 272, "0x10000000", "EPERM", "allowed"},
}

// allowedCalls keep a filter that denies everything from passing: what
// every kernel does (a thread, a fork, naming a thread, dropping pages).
var allowedCalls = []deniedCall{
	{"getpid", 39, "", "allowed", ""},
	{"unshare(CLONE_FILES)", 272, "0x400", "allowed", ""},
	{"prctl(PR_SET_NAME)", 157, "15, S('kp'), 0, 0, 0", "allowed", ""},
	{"madvise(MADV_DONTNEED)", 28, "0, 0, 4", "allowed", ""},
}

const deniedPrelude = `import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
N, P = None, os.getpid()
S = lambda s: ctypes.c_char_p(s.encode())
class TV(ctypes.Structure): _fields_ = [('s', ctypes.c_long), ('u', ctypes.c_long)]
tv = TV(int(time.time()), 0)
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return errno.errorcode.get(ctypes.get_errno(), '?') if r < 0 else 'allowed'
`

// TestKernelIsDeniedIndependentList makes each call of deniedCalls and
// allowedCalls from a real kernel's cell and checks the errno it gets.
func TestKernelIsDeniedIndependentList(t *testing.T) {
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	iso := newIso(t, nil)
	k, _ := startKernel(t, iso, "mallory", "default", Limits{})
	calls := append(append([]deniedCall{}, allowedCalls...), deniedCalls...)
	var code strings.Builder
	code.WriteString(deniedPrelude)
	for _, c := range calls {
		args := ""
		if c.args != "" {
			args = ", " + c.args
		}
		fmt.Fprintf(&code, "print(%q, call(%d%s))\n", c.name, c.nr, args)
	}
	r := run(t, k, code.String())
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			got[line[:i]] = line[i+1:]
		}
	}
	if len(got) != len(calls) {
		t.Errorf("%d answers for %d calls: %q", len(got), len(calls), r.Stdout)
	}
	for _, c := range calls {
		if got[c.name] != c.want {
			t.Errorf("%s (nr %d): %q, want %s (without the filter: %s)", c.name, c.nr, got[c.name], c.want, c.without)
		}
	}
}

// TestDeniedCallNumbers checks the hand-written numbers against x/sys's
// table (another source than the policy compiler's), so a typo cannot
// make a row test some other call.
func TestDeniedCallNumbers(t *testing.T) {
	want := map[string]int{
		"keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
		"bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN, "userfaultfd": unix.SYS_USERFAULTFD,
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER, "io_uring_register": unix.SYS_IO_URING_REGISTER,
		"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD, "init_module": unix.SYS_INIT_MODULE,
		"finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
		"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT, "chroot": unix.SYS_CHROOT,
		"setns": unix.SYS_SETNS, "open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT, "fsopen": unix.SYS_FSOPEN,
		"fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK, "mount_setattr": unix.SYS_MOUNT_SETATTR,
		"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
		"clone(CLONE_NEWUSER)": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3, "ptrace": unix.SYS_PTRACE,
		"process_vm_readv": unix.SYS_PROCESS_VM_READV, "process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
		"acct": unix.SYS_ACCT, "swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "reboot": unix.SYS_REBOOT,
		"settimeofday": unix.SYS_SETTIMEOFDAY, "clock_settime": unix.SYS_CLOCK_SETTIME,
		"io_setup": unix.SYS_IO_SETUP, "io_destroy": unix.SYS_IO_DESTROY, "io_getevents": unix.SYS_IO_GETEVENTS,
		"io_submit": unix.SYS_IO_SUBMIT, "io_cancel": unix.SYS_IO_CANCEL, "io_pgetevents": unix.SYS_IO_PGETEVENTS,
		"fanotify_init": unix.SYS_FANOTIFY_INIT, "memfd_secret": unix.SYS_MEMFD_SECRET,
		"prctl(PR_SET_MEMORY_MERGE)": unix.SYS_PRCTL, "madvise(MADV_MERGEABLE)": unix.SYS_MADVISE,
		"number 1000": 1000, "x32 getpid": 0x40000000 | unix.SYS_GETPID, "unshare(CLONE_NEWUSER)": unix.SYS_UNSHARE,
		"getpid": unix.SYS_GETPID, "unshare(CLONE_FILES)": unix.SYS_UNSHARE, "prctl(PR_SET_NAME)": unix.SYS_PRCTL,
		"madvise(MADV_DONTNEED)": unix.SYS_MADVISE,
	}
	calls := append(append([]deniedCall{}, allowedCalls...), deniedCalls...)
	if len(want) != len(calls) {
		t.Errorf("%d numbers for %d calls", len(want), len(calls))
	}
	for _, c := range calls {
		if n, ok := want[c.name]; !ok || n != c.nr {
			t.Errorf("%s: number %d, x/sys says %d (known %v)", c.name, c.nr, n, ok)
		}
	}
}
