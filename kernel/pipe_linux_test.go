package kernel

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestReplyPipeGrown: the kernel's stdout pipe holds 1 MiB (the default is
// 64 KiB), so a 1 MiB reply moves in one write and one read. The tests
// run as root, or under the default fs.pipe-max-size of 1 MiB: either way
// the resize is allowed.
func TestReplyPipeGrown(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	rc, err := k.stdoutR.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var ferr error
	if err := rc.Control(func(fd uintptr) { size, ferr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	if size < 1<<20 {
		t.Fatalf("stdout pipe holds %d bytes, want 1 MiB", size)
	}
}
