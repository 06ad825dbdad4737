package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool/daemon"
	"github.com/spf13/pflag"
)

func TestFlagsOverrideConfigFile(t *testing.T) {
	dir := testTempDir(t)
	file := filepath.Join(dir, "k.hcl")
	src := "socket = \"/from/file.sock\"\nmax_kernels = 3\nprofile \"default\" {\n  memory_max = \"1GiB\"\n  pids_max = 10\n}\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf := addServeFlags(fs)
	args := []string{"--config", file, "--socket", filepath.Join(dir, "flag.sock"), "--memory-max", "64MiB",
		"--cpu-max", "0.5", "--passthrough", "A, B", "--state-dir", dir}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadServeConfig(sf, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Profiles[daemon.DefaultProfile]
	if cfg.Socket != filepath.Join(dir, "flag.sock") || cfg.MaxKernels != 3 || cfg.StateDir != dir {
		t.Errorf("socket %q, max kernels %d, state %q", cfg.Socket, cfg.MaxKernels, cfg.StateDir)
	}
	if p.MemoryMax != 64<<20 || p.PidsMax != 10 || p.CPUMax != 0.5 {
		t.Errorf("default profile %+v: flags must override only what they set", p)
	}
	if !reflect.DeepEqual(cfg.Env.Passthrough, []string{"A", "B"}) {
		t.Errorf("passthrough %q", cfg.Env.Passthrough)
	}
}

// The cgroup parent defaults to one derived from the state dir, and
// --cgroup-parent and --isolation override the file.
func TestCgroupParentAndIsolationFlags(t *testing.T) {
	dir := testTempDir(t)
	parse := func(args ...string) *daemon.Config {
		t.Helper()
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		sf := addServeFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadServeConfig(sf, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	a, b := parse("--state-dir", filepath.Join(dir, "a")), parse("--state-dir", filepath.Join(dir, "b"))
	if a.Cgroup.Parent == b.Cgroup.Parent || !strings.HasPrefix(a.Cgroup.Parent, "kernpool-") || a.Isolation != kernel.IsolationSandbox {
		t.Errorf("parents %q and %q, isolation %q: want two derived parents, sandbox", a.Cgroup.Parent, b.Cgroup.Parent, a.Isolation)
	}
	c := parse("--state-dir", filepath.Join(dir, "a"), "--cgroup-parent", "mine", "--isolation", "process")
	if c.Cgroup.Parent != "mine" || c.Isolation != kernel.IsolationProcess {
		t.Errorf("parent %q, isolation %q: want the flags' values", c.Cgroup.Parent, c.Isolation)
	}
}

func TestBadServeFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"--memory-max", "lots"}, {"--pids-max", "x"}, {"--cpu-max", "fast"}, {"--idle-timeout", "soon"},
		{"--log-level", "loud"}, {"--max-kernels", "0"}, {"--isolation", "vm"},
	} {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		sf := addServeFlags(fs)
		// A typed flag refuses a bad value as it parses; the config checks
		// the rest.
		err := fs.Parse(args)
		if err == nil {
			_, err = loadServeConfig(sf, func(string) string { return "" })
		}
		if err == nil {
			t.Errorf("%q accepted", args)
		} else if !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "--")) && args[0] != "--max-kernels" && args[0] != "--log-level" {
			t.Errorf("%q: error %q does not name the flag", args, err)
		}
	}
}
