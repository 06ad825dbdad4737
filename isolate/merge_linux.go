package isolate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// ksmDir holds the host's samepage-merging (KSM) knobs and counters, and
// mergePrctl asks the kernel for the per-process switch (probeMergePrctl):
// variables so that tests can give checkMerge a host it does not run on.
var (
	ksmDir     = "/sys/kernel/mm/ksm"
	mergePrctl = probeMergePrctl
)

// mergeProfiles are the names of the profiles with MemoryMerge, sorted.
func mergeProfiles(c Config) []string {
	var out []string
	for name, p := range c.Profiles {
		if p.MemoryMerge {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// checkMerge refuses a MemoryMerge profile on a kernel without samepage
// merging: its kernels' init would fail at every start. It returns the
// doctor line ("" when no profile merges): which profiles merge and
// whether the host's ksmd runs, which the operator, not the daemon, turns
// on (it is host-wide).
func checkMerge(c Config) (string, error) {
	names := mergeProfiles(c)
	if len(names) == 0 {
		return "", nil
	}
	run, err := os.ReadFile(filepath.Join(ksmDir, "run"))
	if err == nil {
		err = mergePrctl()
	}
	if err != nil {
		return "", fmt.Errorf("%w: profile %s: memory_merge needs samepage merging (CONFIG_KSM, Linux 6.4 or later): %w",
			ErrUnsupported, strings.Join(names, ", "), err)
	}
	line := "profiles " + strings.Join(names, ", ") + ": pages open to samepage merging, no address randomisation, one hash seed; "
	switch strings.TrimSpace(string(run)) {
	case "1":
		sharing, _ := os.ReadFile(filepath.Join(ksmDir, "pages_sharing"))
		return line + "ksmd runs (pages_sharing " + strings.TrimSpace(string(sharing)) + ")", nil
	default:
		return line + "ksmd is OFF (" + filepath.Join(ksmDir, "run") + " is " + strings.TrimSpace(string(run)) +
			"): nothing merges until the operator writes 1 there", nil
	}
}

// probeMergePrctl asks the kernel whether it knows the per-process merge
// switch the init step sets: it came with Linux 6.4, after KSM itself, and
// an older kernel answers EINVAL (a 6.1 guest has /sys/kernel/mm/ksm but
// would fail every merging kernel's start).
func probeMergePrctl() error {
	if _, err := unix.PrctlRetInt(unix.PR_GET_MEMORY_MERGE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_GET_MEMORY_MERGE): %w", err)
	}
	return nil
}
