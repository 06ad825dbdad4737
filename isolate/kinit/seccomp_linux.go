package kinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// loadSeccomp sets no_new_privs and loads the daemon's compiled filters
// (package isolate builds them with a policy compiler) on every thread of
// the init (TSYNC), so the interpreter it forks inherits both.
func loadSeccomp(progs [][]byte) error {
	if len(progs) == 0 {
		return errors.New("seccomp: no filter to load")
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	for _, p := range progs {
		if len(p) == 0 || len(p)%8 != 0 {
			return fmt.Errorf("seccomp: malformed program of %d bytes", len(p))
		}
		ins := make([]unix.SockFilter, len(p)/8)
		for i := range ins {
			b := p[8*i:]
			ins[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
		}
		prog := unix.SockFprog{Len: uint16(len(ins)), Filter: &ins[0]}
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
		if errno != 0 {
			return fmt.Errorf("seccomp: load filter: %w", errno)
		}
	}
	return nil
}

// checkSeccomp proves the filter is in force rather than trusting the
// load: /proc says filter mode with no_new_privs, and a new user namespace
// and a keyring call are refused with EPERM.
func checkSeccomp() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("seccomp check: %w", err)
	}
	st := string(b)
	if !strings.Contains(st, "\nSeccomp:\t2\n") || !strings.Contains(st, "\nNoNewPrivs:\t1\n") {
		return errors.New("seccomp check: /proc/self/status shows no filter or no no_new_privs")
	}
	if err := unix.Unshare(unix.CLONE_NEWUSER); !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("seccomp check: unshare(CLONE_NEWUSER) returned %v, want EPERM", err)
	}
	if _, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0); !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("seccomp check: keyctl returned %v, want EPERM", err)
	}
	return nil
}
