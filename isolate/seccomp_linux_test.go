package isolate

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const (
	auditArchX8664 = 0xc000003e
	auditArchI386  = 0x40000003
	retAllow       = 0x7fff0000
	retEPERM       = 0x00050000 | uint32(unix.EPERM)
	retENOSYS      = 0x00050000 | uint32(unix.ENOSYS)
)

// verdict runs the filters in the BPF VM the way the kernel does: the
// strictest (numerically lowest action) result of all of them wins.
func verdict(t *testing.T, vms []*bpf.VM, archID uint32, nr int, arg0 uint64) uint32 {
	t.Helper()
	// seccomp_data in the VM's byte order (it loads big-endian words; the
	// filters index native little-endian words, so each word is stored
	// big-endian at its native offset).
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], uint32(nr))
	binary.BigEndian.PutUint32(data[4:], archID)
	binary.BigEndian.PutUint32(data[16:], uint32(arg0))
	binary.BigEndian.PutUint32(data[20:], uint32(arg0>>32))
	best := uint32(retAllow)
	for _, vm := range vms {
		r, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if uint32(r)&0xffff0000 < best&0xffff0000 {
			best = uint32(r)
		}
	}
	return best
}

func TestFilterVerdicts(t *testing.T) {
	if unix.SYS_CLONE != 56 { // the table below is x86-64's
		t.Skip("verdict table is for x86-64")
	}
	progs, err := compileSeccomp() // the exact bytes the init loads
	if err != nil {
		t.Fatal(err)
	}
	var vms []*bpf.VM
	for _, p := range progs {
		raw := make([]bpf.RawInstruction, len(p)/8)
		for i := range raw {
			b := p[8*i:]
			raw[i] = bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
		}
		insts, ok := bpf.Disassemble(raw)
		if !ok {
			t.Fatal("a compiled program does not disassemble")
		}
		vm, err := bpf.NewVM(insts)
		if err != nil {
			t.Fatal(err)
		}
		vms = append(vms, vm)
	}
	cases := []struct {
		name string
		arch uint32
		nr   int
		arg0 uint64
		want uint32
	}{
		{"read", auditArchX8664, unix.SYS_READ, 0, retAllow},
		{"fork via clone", auditArchX8664, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD), retAllow},
		{"thread via clone", auditArchX8664, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND, retAllow},
		{"clone new user ns", auditArchX8664, unix.SYS_CLONE, unix.CLONE_NEWUSER | uint64(unix.SIGCHLD), retEPERM},
		{"unshare new user ns", auditArchX8664, unix.SYS_UNSHARE, unix.CLONE_NEWUSER, retEPERM},
		{"unshare files", auditArchX8664, unix.SYS_UNSHARE, unix.CLONE_FILES, retAllow},
		{"clone3", auditArchX8664, unix.SYS_CLONE3, 0, retENOSYS},
		{"keyctl", auditArchX8664, unix.SYS_KEYCTL, 0, retEPERM},
		{"prctl memory merge", auditArchX8664, unix.SYS_PRCTL, unix.PR_SET_MEMORY_MERGE, retEPERM},
		{"prctl set name", auditArchX8664, unix.SYS_PRCTL, unix.PR_SET_NAME, retAllow},
		{"bpf", auditArchX8664, unix.SYS_BPF, 0, retEPERM},
		{"io_uring_setup", auditArchX8664, unix.SYS_IO_URING_SETUP, 0, retEPERM},
		{"mount", auditArchX8664, unix.SYS_MOUNT, 0, retEPERM},
		{"ptrace", auditArchX8664, unix.SYS_PTRACE, 0, retEPERM},
		{"process_vm_readv", auditArchX8664, unix.SYS_PROCESS_VM_READV, 0, retEPERM},
		{"x32 ABI read", auditArchX8664, 0x40000000, 0, retENOSYS},
		{"unknown number", auditArchX8664, 1000, 0, retEPERM},
		{"i386 unshare (int 0x80)", auditArchI386, 310, 0x10000000, retEPERM},
		{"i386 getpid", auditArchI386, 20, 0, retEPERM},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := verdict(t, vms, c.arch, c.nr, c.arg0); got != c.want {
				t.Fatalf("verdict %#x, want %#x", got, c.want)
			}
		})
	}
}
