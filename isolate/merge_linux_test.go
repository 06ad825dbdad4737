package isolate

import (
	"strings"
	"testing"

	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/internal/testenv"
)

// mergeProbe prints, from inside a kernel: PR_GET_MEMORY_MERGE, whether
// address-space randomisation is off, the address of None (in the
// interpreter's data), a string hash, PYTHONHASHSEED, and what the kernel
// gets when it tries to opt its own pages into merging (prctl, madvise
// MADV_MERGEABLE) beside a plain madvise.
const mergeProbe = `import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
m = mmap.mmap(-1, 4096)
a = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(m)))
def call(f, *args):
    ctypes.set_errno(0)
    return "%d/%d" % (f(*args), ctypes.get_errno())
print(libc.prctl(68, 0, 0, 0, 0), int(open("/proc/self/personality").read(), 16) & 0x40000 != 0,
      hex(id(None)), hash("kernpool"), os.environ.get("PYTHONHASHSEED", "-"),
      call(libc.prctl, 67, 1, 0, 0, 0), call(libc.madvise, a, 4096, 12), call(libc.madvise, a, 4096, 4))
`

// A memory_merge profile's kernels are open to samepage merging, laid out
// alike (no address randomisation, one hash seed) and say so in
// kernel.isolation; a default profile's are not. No kernel can opt its own
// pages in: the seccomp filter refuses PR_SET_MEMORY_MERGE and
// MADV_MERGEABLE (EPERM, 1) and nothing else of madvise.
func TestMemoryMergeProfile(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCgroupMode(t, cgroup.DetectMode(""), cgroup.ModeLegacy, cgroup.ModeHybrid, cgroup.ModeUnified)
	testenv.RequirePython(t)
	if err := probeMergePrctl(); err != nil {
		t.Skipf("this kernel has no per-process samepage merging (Linux 6.4+): %v", err)
	}
	iso := newIso(t, func(c *Config) {
		c.Profiles["merge"] = Profile{Resources: c.Profiles[DefaultProfile].Resources, MemoryMerge: true}
	})
	if !iso.useInit {
		t.Skip("memory_merge needs the init step")
	}
	r := iso.Report()
	if !strings.Contains(r.MemoryMerge, "profiles merge:") || !r.Profiles["merge"].MemoryMerge || r.Profiles[DefaultProfile].MemoryMerge ||
		!strings.Contains(r.String(), "merge=on") {
		t.Errorf("doctor's report does not show which profile merges: %q\n%s", r.MemoryMerge, r.String())
	}
	probe := func(mode string) ([]string, bool) {
		k, sb := startKernel(t, iso, "alice", mode, Limits{})
		f := strings.Fields(run(t, k, mergeProbe).Stdout)
		if len(f) != 8 {
			t.Fatalf("probe printed %q", f)
		}
		return f, sb.Isolation().MemoryMerge
	}
	a, aMerge := probe("merge")
	b, bMerge := probe("merge")
	plain, plainMerge := probe("default")
	if !aMerge || !bMerge || plainMerge {
		t.Errorf("kernel.isolation memory_merge: merge profile %t %t, default %t", aMerge, bMerge, plainMerge)
	}
	if a[0] != "1" || a[1] != "True" || a[4] == "-" {
		t.Errorf("merging kernel: merge %s, no randomisation %s, PYTHONHASHSEED %s", a[0], a[1], a[4])
	}
	if a[2] != b[2] || a[3] != b[3] {
		t.Errorf("merging kernels differ: None at %s and %s, hash %s and %s", a[2], b[2], a[3], b[3])
	}
	if plain[0] != "0" || plain[1] != "False" || plain[4] != "-" {
		t.Errorf("default kernel: merge %s, no randomisation %s, PYTHONHASHSEED %s", plain[0], plain[1], plain[4])
	}
	for _, f := range [][]string{a, plain} {
		if f[5] != "-1/1" || f[6] != "-1/1" || f[7] != "0/0" {
			t.Errorf("opt-in prctl %s, madvise(MADV_MERGEABLE) %s, madvise(MADV_DONTNEED) %s; want -1/1 -1/1 0/0", f[5], f[6], f[7])
		}
	}
}
