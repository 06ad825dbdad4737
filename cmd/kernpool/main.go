package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/isolate/kinit"
)

// devVersion is the version of a build that says nothing better.
const devVersion = "0.1.0-dev"

// version is the daemon's version, overridable at link time
// (-ldflags "-X main.version=v1.2.3"); otherwise the module version from
// the build info is used (buildVersion).
var version = devVersion

// Exit codes shared by every subcommand (exitCodesHelp, docs/api.md).
const (
	exitOK      = 0
	exitCellErr = 1
	exitUsage   = 2
	exitKilled  = 3
	// exitRetry: refused for capacity, a per-owner quota or the daemon's
	// connection cap; retry later.
	exitRetry = 4
	// exitNoDaemon: doctor found no daemon answering on the socket.
	exitNoDaemon = 2
)

// exitCodesHelp ends `kernpool --help`; docs/api.md repeats it.
const exitCodesHelp = `Exit codes:
  0  ok
  1  the cell raised (or called sys.exit with a non-zero code); kill,
     interrupt, vars, spill, cp: no such kernel, cell or file (cp: or
     the kernel's side refused it: too large, no space, not a regular
     file); serve: the daemon stopped with an error
  2  usage error, the daemon is not reachable or shutting down, or
     another error it answered (internal)
  3  the cell timed out, was interrupted, or its kernel was killed
     (also by the OOM killer); likewise a variables listing (vars)
  4  refused for capacity, a per-owner quota or the daemon's connection
     cap: retry later
doctor: 1 the configured isolation is not available here, 2 no daemon.`

// env is what a subcommand runs with; tests substitute streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// json: the command was asked for --json, so its errors are JSON too.
	json bool
}

// runFunc is a subcommand's body: its positional arguments in, its exit
// code out (its flags are bound by its setup).
type runFunc func(ctx context.Context, e *env, args []string) int

// command is one subcommand: its name, the synopsis of its positional
// arguments, a one-line summary, optional details, and setup, which
// defines its flags and returns its body.
type command struct {
	name, args, summary, long string
	setup                     func(fs *pflag.FlagSet) runFunc
}

func commands() []command {
	return []command{
		serveCommand(),
		execCommand(),
		sessionsCommand(),
		{name: "ps", summary: "list live kernels", setup: psFlags},
		{name: "shutdown", summary: "kill every kernel of an owner", setup: shutdownFlags},
		{name: "kill", args: "KERNEL_ID", summary: "kill one kernel by id", setup: socketOnly(runKill)},
		{name: "interrupt", args: "(KERNEL_ID | --owner O [--mode M])", summary: "interrupt a running cell (its kernel keeps its state)", setup: interruptFlags},
		{name: "vars", args: "(KERNEL_ID | --owner O [--mode M])", summary: "list the variables of a kernel", setup: varsFlags},
		{name: "spill", args: "KERNEL_ID NAME", summary: "print a cell's full spilled stdout", setup: socketOnly(runSpill)},
		{name: "cp", args: cpArgs, summary: "copy a file into or out of a kernel's working dir", long: cpLong, setup: cpFlags},
		drainCommand(),
		routerCommand(),
		tokenCommand(),
		{name: "doctor", summary: "report configuration and host capabilities", setup: doctorFlags,
			long: "Doctor prints the effective configuration (the serve flags and the config file),\nthe isolation this host gives kernels, and what a running daemon reports."},
		{name: "version", summary: "print the version", setup: func(*pflag.FlagSet) runFunc { return runVersion }},
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

// dispatch runs the command line args and returns the exit code.
func dispatch(ctx context.Context, e *env, args []string) int {
	code := exitOK
	root := newRoot(e, &code)
	if len(args) > 1 && args[0] == "help" {
		// cobra prints the top-level help for an unknown topic and succeeds.
		if cmd, _, err := root.Find(args[1:]); err != nil || cmd == root {
			fmt.Fprintf(e.stderr, "kernpool help: unknown command %q\nRun 'kernpool --help' for usage.\n", args[1])
			return exitUsage
		}
	}
	root.SetArgs(normalizeArgs(root, args))
	if err := root.ExecuteContext(ctx); err != nil {
		cmd, _, ferr := root.Find(args)
		name := "kernpool"
		if ferr == nil && cmd != root {
			name = cmd.CommandPath()
		}
		fmt.Fprintf(e.stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return exitUsage
	}
	return code
}

// newRoot builds the command tree; a subcommand's exit code lands in code.
func newRoot(e *env, code *int) *cobra.Command {
	root := &cobra.Command{
		Use:   "kernpool",
		Short: "a sandboxed pool of session-persistent Python kernels",
		Long: "kernpool runs a sandboxed pool of session-persistent Python kernels (serve)\n" +
			"and drives a running daemon over its Unix socket (the other commands).\n\n" + exitCodesHelp,
		Args: cobra.NoArgs,
		// No command: the usage, on stderr, as a usage error.
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(e.stderr, "kernpool: missing command")
			cmd.SetOut(e.stderr)
			_ = cmd.Usage()
			*code = exitUsage
		},
		SilenceErrors: true,
		SilenceUsage:  true,
		// --version (and -v) print what `kernpool version` prints.
		Version: buildVersion().String(),
	}
	root.SetVersionTemplate("kernpool {{.Version}}\n")
	root.Flags().BoolP("version", "v", false, "print the version (what kernpool version prints)")
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	for _, c := range commands() {
		use := c.name
		if c.args != "" {
			use += " " + c.args
		}
		sub := &cobra.Command{
			Use:   use,
			Short: c.summary,
			Long:  c.summary + ".",
			Args:  cobra.ArbitraryArgs, // each body checks its own, with its own message
		}
		if c.long != "" {
			sub.Long = c.long
		}
		run := c.setup(sub.Flags())
		sub.Run = func(cmd *cobra.Command, args []string) { *code = run(cmd.Context(), e, args) }
		registerCompletions(sub)
		root.AddCommand(sub)
	}
	return root
}

// usageError prints a usage problem and returns the usage exit code.
func usageError(e *env, name, format string, a ...any) int {
	return fail(e, name, fmt.Errorf(format, a...), fmt.Sprintf("Run 'kernpool %s --help' for usage.", name), exitUsage)
}

func runVersion(_ context.Context, e *env, _ []string) int {
	fmt.Fprintln(e.stdout, "kernpool", buildVersion())
	return exitOK
}
