package envscrub

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// helperFullDisk runs in a private mount namespace (the parent sets
// Unshareflags, and Go makes the mounts private): it mounts a 64 KiB tmpfs
// on dir and spills 1 MB into it. It prints the Output's fields for the
// parent to judge; the mount vanishes with the namespace.
func helperFullDisk(dir string) int {
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		fmt.Println("SKIP mount:", err)
		return 0
	}
	defer unix.Unmount(dir, 0)
	f := NewPipeline(OutputConfig{}).Filter(nil)
	out, err := f.Finish(strings.Repeat("x", 1_000_000), "", filepath.Join(dir, "spill"), 3)
	entries, _ := os.ReadDir(filepath.Join(dir, "spill"))
	fmt.Printf("err=%v truncated=%v spill=%q files=%d inline=%d\nwarning=%s\n",
		err, out.StdoutTruncated, out.SpillPath, len(entries), len(out.Stdout), out.Warning)
	return 0
}
