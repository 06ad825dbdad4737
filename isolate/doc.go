// Package isolate owns the process attributes a kernel starts with and the
// confinement around it: its own process group, death with the daemon
// (Pdeathsig), rlimits and no_new_privs (applied by the runner before user
// code), an unprivileged uid/gid per live kernel (or per owner) when the
// daemon is root, and a cgroup (package cgroup) holding its limits. On
// Linux with a root daemon every kernel starts through the kernel init step
// (package kinit, Config.InitStep): its own mount, pid, ipc, uts and network
// namespaces and a cgroup namespace, private tmpfs on /tmp, /var/tmp,
// /dev/shm and every other host dir a kernel uid could write (found at New,
// hostpaths_linux.go; the rest read-only), its own devpts and mqueue, a
// fresh /proc and a seccomp filter (compiled here, seccomp_linux.go), all
// before user code; New probes it (ProbeInit) and fails rather than run
// with less. The staging dir is a capped tmpfs of the kernel's own.
// Isolator is the pool's SandboxFactory; Sandbox implements kernel.Sandbox.
//
// It fails closed: in sandbox mode (Config.Isolation, the default) New
// refuses with ErrIsolation when kernels would get less than the
// configuration asks for (isolate/policy.go). Only in process mode, where
// cgroups are unavailable (not root, not Linux, no delegation), do kernels
// still run, confined by process group (kernel.ProcessGroup) and by uid
// when root; Report says once, at start, exactly what is lost and
// Report.Allows what that permits. On Windows each kernel gets a Job Object
// with KILL_ON_JOB_CLOSE. Sandbox.Isolation reports what each kernel has.
//
// Kernel uids come from Config.UIDRange (default 60000-60999), which must
// have no /etc/passwd or /etc/group entries; uids with running processes at
// start are not used. Like systemd's DynamicUser, a uid belongs to one live
// kernel and is freed only after its cgroup is empty; the least recently
// used free uid is leased next, after what its previous tenant left in the
// host's world-writable dirs and SysV IPC was removed (a bounded scrub that
// never withholds the uid); a uid retired because its processes outlived
// its kernel comes back once none runs.
package isolate
