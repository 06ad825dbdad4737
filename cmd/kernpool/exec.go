package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
)

// maxStdinCode bounds code read from stdin (the API refuses bodies over 16 MiB).
const maxStdinCode = 16 << 20

type execFlags struct {
	socket, owner, mode, interpreter, cwd, tools, toolHandler string
	passthrough, outputs, session                             string
	env                                                       []string
	reset, asJSON, stream, ownerGiven                         bool
	timeout                                                   time.Duration
}

func execCommand() command {
	return command{name: "exec", args: "[CODE | -]", summary: "run one cell in an owner's kernel", setup: execSetup,
		long: "Exec runs CODE (or stdin, for - or no CODE) as one cell in the owner's kernel,\n" +
			"started on first use and kept, with its variables, for the next cell. Flags may\n" +
			"come before or after CODE; put CODE after -- when it starts with a dash.\n\n" +
			"Exit codes: 0 ok, 1 the cell raised, 2 usage or the daemon is not reachable,\n" +
			"3 timeout, interrupt or a killed kernel, 4 refused for capacity or quota (retry)."}
}

func execSetup(fs *pflag.FlagSet) runFunc {
	var f execFlags
	addSocketFlag(fs, &f.socket)
	fs.StringVar(&f.owner, "owner", "default", "owner (tenant) whose kernel runs the cell")
	fs.StringVar(&f.mode, "mode", "", "mode: selects the kernel's profile (default \"default\")")
	fs.StringVar(&f.interpreter, "interpreter", "", "absolute `path` of python3 (default: the daemon's)")
	fs.StringVar(&f.cwd, "cwd", "", "absolute working `dir` of the kernel (default: its staging dir)")
	fs.StringVar(&f.tools, "tools", "", "the kernel's tool set, `a,b` (part of the kernel's key)")
	fs.StringVar(&f.passthrough, "passthrough", "", "extra environment `NAME[,NAME...]` for a new kernel")
	fs.BoolVar(&f.reset, "reset", false, "discard the kernel's state before the cell")
	newDuration(fs, &f.timeout, "timeout", 0, "cell timeout, e.g. 30s, 2m or 45 (seconds) (default: the daemon's)")
	fs.BoolVar(&f.asJSON, "json", false, "print the whole result object as JSON")
	fs.BoolVar(&f.stream, "stream", false, "print output as the cell writes it (the default on a terminal, never with --json)")
	fs.StringVar(&f.outputs, "outputs", "", "write each display (image, HTML, ...) to a file in `DIR` and print its path")
	fs.StringVar(&f.toolHandler, "tool-handler", "", "run `CMD` via sh -c per tool call: call JSON on stdin, result on stdout")
	fs.StringVar(&f.session, "session", "", "run in the explicit session `ID` (kernpool sessions create): its owner, mode, tools and env apply")
	addEnvFlag(fs, &f.env, "an environment value for this cell only")
	return func(ctx context.Context, e *env, args []string) int {
		f.ownerGiven = fs.Changed("owner")
		return runExec(ctx, e, &f, args)
	}
}

func runExec(ctx context.Context, e *env, f *execFlags, args []string) int {
	e.json = f.asJSON
	if len(args) > 1 {
		return usageError(e, "exec", "expected one CODE argument (or - for stdin), got %d arguments; quote the code as one argument", len(args))
	}
	arg := ""
	if len(args) == 1 {
		arg = args[0]
	}
	code, err := readCode(e, arg)
	if err != nil {
		return usageError(e, "exec", "%v", err)
	}
	envs, err := parseEnv(f.env, e.getenv)
	if err != nil {
		return usageError(e, "exec", "%v", err)
	}
	req := pool.Request{
		Owner: f.owner, Mode: f.mode, Interpreter: f.interpreter, Cwd: f.cwd,
		Tools: splitList(f.tools), Code: code, Reset: f.reset, Timeout: f.timeout,
		Passthrough: splitList(f.passthrough), Session: f.session, Env: envs,
	}
	if f.session != "" && !f.ownerGiven {
		req.Owner = "" // the session's owner
	}
	client := api.NewClient(socketPath(f.socket, e.getenv))
	defer client.CloseIdleConnections()
	var res *pool.Result
	dw := &displayWriter{e: e, dir: f.outputs}
	live := !f.asJSON && (f.stream || isTerminal(e.stdout))
	switch {
	case live:
		var h pool.ToolHandler
		if f.toolHandler != "" {
			h = shellToolHandler(f.toolHandler)
		}
		res, err = client.ExecuteLive(ctx, req, h, liveOutput(e, dw))
	case f.toolHandler != "":
		res, err = client.ExecuteStream(ctx, req, shellToolHandler(f.toolHandler))
	default:
		res, err = client.Execute(ctx, req)
	}
	if err != nil {
		return reportExecError(ctx, e, err)
	}
	if live {
		return printStreamed(e, res)
	}
	if !f.asJSON {
		defer func() {
			for i := range res.Displays {
				dw.show(&res.Displays[i])
			}
		}()
	}
	return printResult(e, res, f.asJSON)
}

// printStreamed ends a streamed cell: its output is printed already; what
// failed and the warnings go to stderr.
func printStreamed(e *env, res *pool.Result) int {
	if res.Status != pool.StatusSuccess && res.Error != "" {
		fmt.Fprintln(e.stderr, strings.TrimRight(res.Error, "\n"))
	}
	if res.Warning != "" {
		fmt.Fprintf(e.stderr, "kernpool: %s\n", res.Warning)
	}
	return exitCode(res)
}

// readCode returns the cell: the argument, or stdin for "-" or none.
func readCode(e *env, arg string) (string, error) {
	if arg != "" && arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(io.LimitReader(e.stdin, maxStdinCode+1))
	if err != nil {
		return "", fmt.Errorf("read code from stdin: %w", err)
	}
	if len(b) > maxStdinCode {
		return "", fmt.Errorf("code on stdin exceeds %d bytes", maxStdinCode)
	}
	return string(b), nil
}

func socketPath(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	return daemon.DefaultSocket(getenv)
}

// reportExecError prints why no result came back and picks the exit code:
// 3 when the user interrupted (the daemon interrupted the cell), else
// connError's (4 when the daemon refused for now, retry later; else 2).
func reportExecError(ctx context.Context, e *env, err error) int {
	if ctx.Err() != nil {
		return fail(e, "exec", errors.New("interrupted; the daemon interrupts the cell (KeyboardInterrupt) and keeps the kernel's state unless the cell does not stop within its grace"), "", exitKilled)
	}
	return connError(e, "exec", err)
}

// printResult writes the cell's output as a terminal would and maps the
// status to the exit code: 0 success, 1 exception or sys.exit, 3 timeout,
// interrupt or a killed kernel (also by the OOM killer).
func printResult(e *env, res *pool.Result, asJSON bool) int {
	code := exitCode(res)
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(e.stderr, "kernpool exec: %v\n", err)
			return exitUsage
		}
		return code
	}
	// As a terminal would: the cell's stdout on stdout, its stderr and
	// traceback (after the result's "--- stderr ---" separator) on stderr.
	out, errText, _ := strings.Cut(res.Output, pool.StderrSeparator)
	// A failure's appended message gets its line ended, so the shell
	// prompt starts afresh; a success prints exactly what the cell wrote.
	if res.Status != pool.StatusSuccess && out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	_, _ = io.WriteString(e.stdout, out)
	_, _ = io.WriteString(e.stderr, errText)
	if res.Status != pool.StatusSuccess && res.Error != "" && !strings.Contains(res.Output, res.Error) {
		fmt.Fprintln(e.stderr, strings.TrimRight(res.Error, "\n"))
	}
	if res.Warning != "" {
		fmt.Fprintf(e.stderr, "kernpool: %s\n", res.Warning)
	}
	return code
}

func exitCode(res *pool.Result) int {
	switch {
	case res.Status == pool.StatusSuccess && res.Kernel.Ended && res.ExitCode != 0:
		return exitCellErr // sys.exit(n), n != 0
	case res.Status == pool.StatusSuccess:
		return exitOK
	case res.Status == pool.StatusTimeout, res.Status == pool.StatusInterrupted,
		res.Kernel.OOMKilled, res.ExitCode == -1:
		return exitKilled
	}
	return exitCellErr
}
