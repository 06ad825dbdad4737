//go:build unix

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Flags may follow the code, in the double-dash form and in the
// single-dash form Go's flag package accepted (scripts and units use
// both), and "--" ends the flags so that code may start with a dash.
func TestFlagsAfterCodeAndSingleDash(t *testing.T) {
	d := startServe(t)
	steps := []struct {
		args   []string
		stdout string
	}{
		{[]string{"exec", "x = 40; print(x)", "--owner", "bob", "--socket", d.socket}, "40\n"},
		{[]string{"exec", "-socket", d.socket, "print(x + 1)", "-owner", "bob"}, "41\n"},
		{[]string{"exec", "-socket=" + d.socket, "-owner=bob", "-json", "print(x + 2)"}, `"output": "42\n"`},
		{[]string{"exec", "--socket", d.socket, "--owner", "bob", "--", "-len(str(print(-x)))"}, "-40\n"},
		{[]string{"ps", "-socket", d.socket}, "bob"},
	}
	for _, s := range steps {
		r := cli(t, "", s.args...)
		if r.code != 0 || !strings.Contains(r.stdout, s.stdout) {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want exit 0 and %q", s.args, r.code, r.stdout, r.stderr, s.stdout)
		}
	}
	// A flag's value that looks like a single-dash flag stays a value.
	if r := cli(t, "", "exec", "--socket", d.socket, "--owner", "-json", "print(1)"); r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("an owner named -json: %+v", r)
	}
}

// `help CMD`, `CMD --help` and `CMD -help` print the command's help on
// stdout with typed flags; the top-level help lists the exit codes.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "exec"}, {"exec", "--help"}, {"exec", "-help"}, {"exec", "-h"}} {
		r := cli(t, "", args...)
		for _, want := range []string{"kernpool exec [CODE | -] [flags]", "--timeout duration", "--socket path", "Exit codes"} {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Fatalf("%q: exit %d, stdout lacks %q:\n%s%s", args, r.code, want, r.stdout, r.stderr)
			}
		}
	}
	if r := cli(t, "", "help", "frob"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "frob"`) {
		t.Errorf("help for an unknown command: %+v, want exit 2", r)
	}
	r := cli(t, "", "help", "serve")
	for _, want := range []string{"--memory-max size", "(default 512MiB)", "--idle-timeout duration", "(default 30m)",
		"--cell-timeout duration        default cell timeout (default 5m)", "--max-kernels int", "(default 64)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help serve lacks %q:\n%s", want, r.stdout)
		}
	}
	r = cli(t, "", "--help")
	for _, want := range []string{"Exit codes:", "0  ok", "1  the cell raised", "2  usage", "3  the cell timed out", "4  refused for capacity", "completion"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("--help (exit %d) lacks %q:\n%s", r.code, want, r.stdout)
		}
	}
}

// Shell completion: a script per shell, and the fixed values of a flag
// offered by the binary itself.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_kernpool kernpool",
		"zsh":  "#compdef kernpool",
		"fish": "complete -c kernpool",
	} {
		r := cli(t, "", "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, output lacks %q:\n%.300s%s", shell, r.code, want, r.stdout, r.stderr)
		}
	}
	r := cli(t, "", "__complete", "serve", "--isolation", "")
	if r.code != 0 || !strings.Contains(r.stdout, "sandbox\nprocess\n") {
		t.Errorf("completing --isolation: %+v", r)
	}
	r = cli(t, "", "__complete", "ex")
	if !strings.Contains(r.stdout, "exec\t") {
		t.Errorf("completing a command: %+v", r)
	}
}

// Every exit code of exec, against a real daemon: 0 ok, 1 cell error, 2
// usage, 3 timeout, 4 capacity (every kernel busy, none may be evicted).
func TestExecEveryExitCode(t *testing.T) {
	d := startServe(t, "--max-kernels", "1")
	busy := exec.Command(binPath, "exec", "--socket", d.socket, "--owner", "holder", "import time; time.sleep(600)")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Process.Kill(); _ = busy.Wait() }()
	waitUntil(t, "the busy cell", func() bool { return busyPid(t, d, "holder") > 0 })
	r := cli(t, "", "exec", "--socket", d.socket, "--owner", "other", "1")
	if r.code != 4 || !strings.Contains(r.stderr, "kernel cap") {
		t.Fatalf("capacity: %+v, want exit 4 naming the kernel cap", r)
	}
	if r := cli(t, "", "interrupt", "--socket", d.socket, "--owner", "holder"); r.code != 0 {
		t.Fatalf("interrupt: %+v", r)
	}
	_ = busy.Wait()
	waitUntil(t, "the interrupted cell to end", func() bool { return busyPid(t, d, "holder") == 0 })
	for _, tt := range []struct {
		code int
		args []string
	}{
		{0, []string{"print(1)", "--owner", "other"}},
		{1, []string{"1/0", "--owner", "other"}},
		{2, []string{"1", "--owner"}},
		{3, []string{"import time; time.sleep(60)", "--owner", "other", "--timeout", "1s"}},
	} {
		r := cli(t, "", append([]string{"exec", "--socket", d.socket}, tt.args...)...)
		if r.code != tt.code {
			t.Errorf("exec %q: exit %d, want %d\n%s", tt.args, r.code, tt.code, r.stderr)
		}
	}
}
