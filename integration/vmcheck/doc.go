// Package vmcheck proves, without any kernpool code, that the machine it
// runs on gives kernpool what it relies on under unified cgroup v2: a
// delegated group the caller must split into leaves, the memory controller's
// OOM kill and its memory.events verdict, the pids cap, cgroup.kill of a
// whole tree (setsid grandchildren included) and clone3 CLONE_INTO_CGROUP.
// integration/vm/run runs it first inside the VM, so a red kernpool run
// can be told apart from a broken VM. Its tests skip on a host that is not
// unified cgroup v2 and only ever touch groups they create and mark.
package vmcheck
