//go:build unix

package envscrub

import "syscall"

// noFollow refuses a symlink as the spill file's last path component.
const noFollow = syscall.O_NOFOLLOW
