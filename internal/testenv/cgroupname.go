package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// runTag tells this test process from earlier ones with the same pid: a
// test binary killed mid-test (a mutant run's timeout) leaves its cgroups
// behind, pids are reused, and a later test's isolator rightly refuses a
// group another state dir marked.
var runTag = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// CgroupParent is a cgroup parent name no other test (of this process or
// an earlier one) uses: prefix, pid, a per-process tag and the test name.
func CgroupParent(tb testing.TB, prefix string) string {
	return fmt.Sprintf("%s-%d-%s-%s", prefix, os.Getpid(), runTag, strings.ReplaceAll(tb.Name(), "/", "_"))
}
