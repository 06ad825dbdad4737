package cgroup

import (
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// On a hybrid host (v1 controllers plus a cgroup2 mount without
// controllers at <mount>/unified) the v1 pool also keeps a parent on the
// cgroup2 mount: it gives what v1 lacks, clone3 placement and an atomic
// cgroup.kill of the whole tree.

// setupUnified uses the hybrid host's cgroup2 mount for placement and
// kill when it has cgroup.kill (Linux >= 5.14). By hand: the library's
// cgroup2 manager assumes a unified host.
func (p *v1Pool) setupUnified(log hclog.Logger) {
	root := filepath.Join(p.mount, "unified")
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return
	}
	dir := filepath.Join(root, p.parentRel)
	created, from, err := ensureParentDir(dir, p.cfg, "")
	if err != nil {
		log.Warn("cgroup2 mount not usable for kernel kill", "dir", dir, "error", err)
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		if created {
			_ = os.Remove(dir)
		}
		return
	}
	if created {
		p.created = append(p.created, dir)
	}
	p.adopted = appendNew(p.adopted, from)
	p.udir = dir
	p.dirs = append(p.dirs, dir)
}
