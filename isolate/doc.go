// Package isolate owns the process attributes a kernel starts with and the
// confinement around it: its own process group, death with the daemon
// (Pdeathsig), rlimits and no_new_privs (applied by the runner before user
// code), an unprivileged uid/gid per live kernel (or per owner) when the
// daemon is root, optional network and pid namespaces, and a cgroup (package
// cgroup) holding its limits. Isolator is the pool's SandboxFactory; Sandbox
// implements kernel.Sandbox.
//
// Where cgroups are unavailable (not root, not Linux, no delegation) kernels
// still run, confined by process group (and by uid when root); Report says
// once, at start, exactly what is lost. On Windows each kernel gets a Job
// Object with KILL_ON_JOB_CLOSE.
//
// Kernel uids come from Config.UIDRange (default 60000-60999), which must
// have no /etc/passwd or /etc/group entries; uids with running processes at
// start are not used. Like systemd's DynamicUser, a uid belongs to one live
// kernel and is freed only after its cgroup is empty.
package isolate
