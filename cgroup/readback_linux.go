package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The limits a group really has are read back from its files, not from
// what the pool asked for: the kernel rounds (v1 memory to pages), and a
// missing controller silently enforces nothing.

// v1Unlimited: v1 reports "no memory limit" as a page-aligned near-MaxInt64.
const v1Unlimited = int64(1) << 62

func (g *v1Group) limits() (Limits, error) {
	var l Limits
	var err error
	if d := g.dir("memory"); d != "" {
		if l.MemoryMax, err = readLimit(filepath.Join(d, "memory.limit_in_bytes")); err != nil {
			return l, err
		}
		if l.MemoryMax >= v1Unlimited {
			l.MemoryMax = 0
		}
	}
	if d := g.dir("pids"); d != "" {
		if l.PidsMax, err = readLimit(filepath.Join(d, "pids.max")); err != nil {
			return l, err
		}
	}
	if d := g.dir("cpu"); d != "" {
		quota, err := readLimit(filepath.Join(d, "cpu.cfs_quota_us"))
		if err != nil {
			return l, err
		}
		period, err := readLimit(filepath.Join(d, "cpu.cfs_period_us"))
		if err != nil {
			return l, err
		}
		if quota > 0 && period > 0 {
			l.CPUMax = float64(quota) / float64(period)
		}
	}
	return l, nil
}

func (g *v2Group) limits() (Limits, error) {
	var l Limits
	var err error
	if l.MemoryMax, err = readLimit(filepath.Join(g.dir, "memory.max")); err != nil {
		return l, err
	}
	if l.PidsMax, err = readLimit(filepath.Join(g.dir, "pids.max")); err != nil {
		return l, err
	}
	b, err := os.ReadFile(filepath.Join(g.dir, "cpu.max"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return l, err
	}
	if f := strings.Fields(string(b)); len(f) == 2 && f[0] != "max" {
		quota, err1 := strconv.ParseInt(f[0], 10, 64)
		period, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || period <= 0 {
			return l, fmt.Errorf("parse %s: %q", filepath.Join(g.dir, "cpu.max"), b)
		}
		l.CPUMax = float64(quota) / float64(period)
	}
	return l, nil
}

// readLimit reads a one-value limit file: a number, "max" or -1 (no
// limit: 0), or a missing file (no controller: 0).
func readLimit(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" || s == "-1" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}
