// Package cgroup owns kernpool's use of Linux control groups: it detects the
// host's cgroup mode (unified v2, hybrid, legacy v1, none), creates one
// pool-owned parent group and one child group per kernel (named after the
// kernel id) with resource limits, kills a kernel's whole process tree from
// its group, reads the out-of-memory verdict and live statistics, and sweeps
// the groups a dead daemon instance left behind.
//
// Groups are driven through github.com/containerd/cgroups/v3, which is
// imported only from _linux.go files. Where the library lacks something
// (bounded freezing, xattr markers, moving the daemon into a leaf, the
// controllers of only our own parent), cgroupfs is written by hand and the
// code says so.
//
// # Marking (the safety rule)
//
// The pool never kills or removes anything in a group it did not create. The
// pool parent directory carries the extended attribute
// "trusted.kernpool.owner" whose value is Config.Marker (the daemon's state
// directory). cgroupfs (kernfs) supports trusted.* xattrs on v1 and v2 for
// root. Where setting it fails (EOPNOTSUPP), the parent's path is recorded in
// the marker file <StateDir>/cgroup-parents instead. Before every sweep, kill
// or removal the parent is checked: its xattr must equal Config.Marker, or,
// without xattr support, its path must be listed in the marker file. An
// existing parent that is not marked is refused with ErrForeign. Within a
// marked parent only children whose names are kernel ids ("k" + 16 lower-case
// hex digits) are swept.
//
// # Layout
//
// Legacy v1 and hybrid hosts: <mount>/<controller>/<parent>/<id> for each of
// the freezer, pids, memory, cpu and cpuacct hierarchies that are mounted.
// The kernel places itself by writing "0" into each group's cgroup.procs
// before any user code runs (see PlacementFiles). On a hybrid host whose
// cgroup2 mount has cgroup.kill (Linux >= 5.14), each kernel also gets
// <mount>/unified/<parent>/<id>: it is cloned straight into it
// (CLONE_INTO_CGROUP works on the controller-less v2 hierarchy), and a tree
// kill writes its cgroup.kill, which catches forks atomically; the freezer
// sequence is used only without it. A pool that kills through the freezer
// keeps the empty group <mount>/freezer/<parent>/freezer-pin FROZEN for its
// life, so that per-kill freezes never switch the kernel's freezer static
// key (kernel text rewriting on every CPU; see pinFreezer).
//
// Unified v2: <mount>/<parent>/<id>. A relative parent is created under the
// daemon's own group when that group is delegated (systemd Delegate=yes); the
// daemon then moves itself into the leaf <own>/supervisor so that kernel
// groups can be siblings of it (the no-internal-processes rule). Kernels are
// spawned straight into their group with clone3(CLONE_INTO_CGROUP).
package cgroup
