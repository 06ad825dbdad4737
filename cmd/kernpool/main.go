package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kernpool/kernpool/isolate/kinit"
)

// devVersion is the version of a build that says nothing better.
const devVersion = "0.1.0-dev"

// version is the daemon's version, overridable at link time
// (-ldflags "-X main.version=v1.2.3"); otherwise the module version from
// the build info is used (buildVersion).
var version = devVersion

// Exit codes shared by every subcommand (docs/api.md lists them).
const (
	exitOK      = 0
	exitCellErr = 1
	exitUsage   = 2
	exitKilled  = 3
	// exitRetry: refused for capacity or a per-owner quota; retry later.
	exitRetry = 4
	// exitNoDaemon: doctor found no daemon answering on the socket.
	exitNoDaemon = 2
)

// env is what a subcommand runs with; tests substitute streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// command is one subcommand: its name, one-line summary and body.
type command struct {
	name, summary string
	run           func(ctx context.Context, e *env, args []string) int
}

func commands() []command {
	return []command{
		{"serve", "run the daemon on a Unix socket", runServe},
		{"exec", "run one cell in an owner's kernel", runExec},
		{"ps", "list live kernels", runPs},
		{"shutdown", "kill every kernel of an owner", runShutdown},
		{"kill", "kill one kernel by id", runKill},
		{"interrupt", "interrupt a running cell (its kernel keeps its state)", runInterrupt},
		{"vars", "list the variables of a kernel", runVars},
		{"spill", "print a cell's full spilled stdout", runSpill},
		{"doctor", "report configuration and host capabilities", runDoctor},
		{"version", "print the version", runVersion},
	}
}

func main() {
	// A kernel's init step is this binary re-executed (docs/design.md, "The
	// sandbox"): it never gets past this line.
	kinit.Main()
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	// serve installs its own signal handling (drain, then force); every
	// other command cancels its context on the first SIGINT/SIGTERM, which
	// disconnects from the daemon and so interrupts a running cell.
	ctx := context.Background()
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	code := dispatch(ctx, e, os.Args[1:])
	os.Exit(code)
}

func dispatch(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		usage(e.stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "kernpool: unknown command %q\n\n", name)
	usage(e.stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kernpool COMMAND [flags] [args]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'kernpool COMMAND -h' for a command's flags.")
	fmt.Fprintln(w, "Exit codes: 0 ok, 1 cell error, 2 usage or connection error, 3 timeout or killed,")
	fmt.Fprintln(w, "4 refused for capacity or quota (retry later). doctor: 1 isolation unavailable, 2 no daemon.")
}

// newFlagSet returns a FlagSet that reports errors instead of exiting.
func newFlagSet(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: kernpool %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; it returns (exit code, false) when the command
// must stop: 0 after -h, 2 after a bad flag (the flag package printed why).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// usageError prints a usage problem and returns the usage exit code.
func usageError(e *env, fs *flag.FlagSet, format string, a ...any) int {
	fmt.Fprintf(e.stderr, "kernpool %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fmt.Fprintf(e.stderr, "Run 'kernpool %s -h' for usage.\n", fs.Name())
	return exitUsage
}

func runVersion(_ context.Context, e *env, _ []string) int {
	fmt.Fprintln(e.stdout, "kernpool", buildVersion())
	return exitOK
}
