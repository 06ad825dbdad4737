package kinit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// addrNoRandomize is personality(2)'s ADDR_NO_RANDOMIZE.
const addrNoRandomize = 0x0040000

// queryPersonality is personality(2)'s "read only" argument.
const queryPersonality = 0xffffffff

// enableMerge opens this process's memory, and that of everything it forks
// and execs from now on (Linux 6.7 and later keep the flag across exec),
// to samepage merging, and turns address-space randomisation off for what
// it execs: kernels of one profile then map the interpreter, its heap and
// the preloaded modules at the same addresses, so their pages hold the
// same pointers and merge. It reports whether the kernel now says merging
// is on; an old kernel without the prctl is an error, never a silent
// kernel that merges nothing.
func enableMerge() (bool, error) {
	if err := unix.Prctl(unix.PR_SET_MEMORY_MERGE, 1, 0, 0, 0); err != nil {
		return false, fmt.Errorf("memory merge: prctl(PR_SET_MEMORY_MERGE): %w", err)
	}
	on, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_MEMORY_MERGE, 0, 0, 0, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("memory merge: prctl(PR_GET_MEMORY_MERGE): %w", errno)
	}
	cur, _, errno := unix.Syscall(unix.SYS_PERSONALITY, queryPersonality, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("memory merge: personality: %w", errno)
	}
	if _, _, errno := unix.Syscall(unix.SYS_PERSONALITY, cur|addrNoRandomize, 0, 0); errno != 0 {
		return false, fmt.Errorf("memory merge: personality(ADDR_NO_RANDOMIZE): %w", errno)
	}
	return on == 1, nil
}
