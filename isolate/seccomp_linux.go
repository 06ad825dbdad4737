package isolate

import (
	"encoding/binary"
	"fmt"
	"sort"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DeniedSyscalls are the syscalls a kernel may never make (EPERM): the
// attack surface of most recent kernel privilege escalations (keyrings,
// eBPF, perf, userfaultfd, io_uring), ways out of the sandbox (mounts,
// namespace switches, kexec, modules, handle-based opens) and ways into
// other processes (ptrace, process_vm_*), and host-wide pools a kernel
// could drain for everyone (Linux AIO contexts count toward fs.aio-max-nr;
// fanotify groups and memfd_secret pages are nothing a kernel needs; see
// docs/design.md, "Host-wide pools"). Names a platform lacks are skipped.
// A new slice on every call.
func DeniedSyscalls() []string {
	return []string{
		"keyctl", "add_key", "request_key",
		"bpf", "perf_event_open", "userfaultfd",
		"io_uring_setup", "io_uring_enter", "io_uring_register",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
		"mount", "umount2", "pivot_root", "chroot", "setns",
		"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
		"open_by_handle_at", "name_to_handle_at",
		"ptrace", "process_vm_readv", "process_vm_writev",
		"acct", "swapon", "swapoff", "reboot",
		"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
		"fanotify_init", "memfd_secret",
	}
}

// filters are the kernel's seccomp policy, as two filters (the kernel
// applies the stricter verdict of both):
//
//   - the deny filter: DeniedSyscalls, clone/unshare asking for a new user
//     namespace, and a kernel opting its pages into samepage merging itself
//     (prctl PR_SET_MEMORY_MERGE, madvise MADV_MERGEABLE: only the init
//     does, for a MemoryMerge profile, before this filter) get EPERM; clone3 gets ENOSYS, because its flags sit in
//     memory a filter cannot read, so libc falls back to clone, whose flags
//     it can; everything else is allowed;
//   - the ABI guard: every syscall of the native table is allowed, and
//     anything else gets EPERM: numbers of another ABI (i386 through int
//     0x80 on x86-64, which a deny list alone lets through, since a filter
//     matches numbers of one ABI) and numbers newer than the table.
//
// Two small programs rather than one: each stays simple to read, and the
// kernel caches the constant verdicts of both per syscall number.
func filters() ([]seccomp.Filter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	var deny, all []string
	for _, name := range DeniedSyscalls() {
		if _, ok := info.SyscallNames[name]; ok {
			deny = append(deny, name)
		}
	}
	for name := range info.SyscallNames {
		all = append(all, name)
	}
	sort.Strings(all)
	newUser := []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}}
	denyFilter := seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deny},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "clone", Conditions: newUser}, {Name: "unshare", Conditions: newUser},
				{Name: "prctl", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.Equal, Value: unix.PR_SET_MEMORY_MERGE}}},
				{Name: "madvise", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.Equal, Value: unix.MADV_MERGEABLE}}},
			}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}}
	abiGuard := seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: seccomp.Policy{
		DefaultAction: seccomp.ActionErrno,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionAllow, Names: all}},
	}}
	return []seccomp.Filter{abiGuard, denyFilter}, nil
}

// compileSeccomp assembles the filters once per daemon into the raw
// programs the init loads (kinit.Config.Seccomp): the init binary then
// needs neither the policy compiler nor its syscall tables.
func compileSeccomp() ([][]byte, error) {
	fs, err := filters()
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(fs))
	for _, f := range fs {
		insts, err := f.Policy.Assemble()
		if err != nil {
			return nil, fmt.Errorf("seccomp: %w", err)
		}
		raw, err := bpf.Assemble(insts)
		if err != nil {
			return nil, fmt.Errorf("seccomp: %w", err)
		}
		// struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; }, native order.
		prog := make([]byte, 0, 8*len(raw))
		for _, r := range raw {
			prog = binary.NativeEndian.AppendUint16(prog, r.Op)
			prog = append(prog, r.Jt, r.Jf)
			prog = binary.NativeEndian.AppendUint32(prog, r.K)
		}
		out = append(out, prog)
	}
	return out, nil
}
