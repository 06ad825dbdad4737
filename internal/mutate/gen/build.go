package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// prepare runs the unmutated builds (the -testpkg baseline, or the
// coverage map and a plain build of the package's tests, which mutant
// builds share all but the mutated package with) and then snapshots the
// build cache: trimming keeps what they built.
func (r *runner) prepare(coverPath string, fresh bool) error {
	if r.other != nil {
		if err := r.baseline(); err != nil {
			return err
		}
	} else {
		if err := r.coverage(coverPath, fresh); err != nil {
			return err
		}
		if out, err := r.buildTest(r.pkg, filepath.Join(r.work, "plain.test"), ""); err != nil {
			return fmt.Errorf("building %s's tests: %v\n%s", r.pkg, err, out)
		}
	}
	return r.cache.snapshot()
}

// buildMutant builds pkg's test binary with the mutant's overlay; false
// when the mutant itself does not compile (NOT VIABLE). A build the
// environment failed (a full disk, memory, a killed toolchain) says
// nothing of the mutant: gen's cache is emptied and the build tried once
// more, and failing again is an error that stops gen.
func (r *runner) buildMutant(pkg, bin, ov string) (bool, error) {
	for try := 0; ; try++ {
		out, err := r.buildTest(pkg, bin, ov)
		if err == nil {
			return true, nil
		}
		why := envFailure(out, err)
		if why == "" {
			fmt.Printf("    does not compile:\n%s\n", indent(tail(out, 4)))
			return false, nil
		}
		if try > 0 || r.cache == nil {
			return false, fmt.Errorf("building the mutant failed: %s, not the mutant's compile error: %v\n%s",
				why, err, indent(tail(out, 6)))
		}
		fmt.Printf("    build failed (%s): emptying the build cache, building again\n", why)
		if err := r.cache.empty(); err != nil {
			return false, err
		}
	}
}

// envMarks are what go and its tools print when the host, not the code,
// failed them.
var envMarks = []string{
	"no space left on device", "disk quota exceeded", "cannot allocate memory",
	"out of memory", "signal: killed", "read-only file system", "input/output error",
	"too many open files", "resource temporarily unavailable",
}

// compileError is a compiler or type checker message at a position.
var compileError = regexp.MustCompile(`\.go:\d+:\d+: `)

// envFailure says why a failed build is the environment's fault, or ""
// when it is the code's: only a build that exited with a compile error at
// a position, and none of envMarks, is the mutant's.
func envFailure(out string, err error) string {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return "go did not run"
	}
	if !exit.Exited() {
		return "go was killed"
	}
	low := strings.ToLower(out)
	for _, m := range envMarks {
		if strings.Contains(low, m) {
			return m
		}
	}
	if !compileError.MatchString(out) {
		return "a failure with no compile error"
	}
	return ""
}
