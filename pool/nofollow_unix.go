//go:build unix

package pool

import "syscall"

// noFollow refuses a symlink as a spill file's last path component.
const noFollow = syscall.O_NOFOLLOW
