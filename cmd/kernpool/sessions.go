package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// Explicit sessions on the command line: `kernpool sessions` lists them
// and creates, shows, restarts and deletes one; exec, interrupt and vars
// take --session ID.

type sessionFlags struct {
	socket, owner, mode, interpreter, cwd, tools string
	env                                          []string
	asJSON                                       bool
}

func sessionsCommand() command {
	return command{name: "sessions", args: "[create | show ID | restart ID | delete ID]", summary: "list, create and end explicit sessions", setup: sessionsSetup,
		long: "Sessions lists the explicit sessions (of --owner only, when given). With an action:\n" +
			"  create       creates one (--owner, --mode, --interpreter, --cwd, --tools, --env) and\n" +
			"               prints its id, for exec --session ID\n" +
			"  show ID      describes it\n" +
			"  restart ID   kills its kernel (its state is lost); the session stays\n" +
			"  delete ID    kills its kernel and ends the session\n\n" +
			"--env NAME=VALUE sets a value for the session's kernel; --env NAME takes the value\n" +
			"from this command's own environment (it then does not show in the process list)."}
}

func sessionsSetup(fs *pflag.FlagSet) runFunc {
	var f sessionFlags
	addSocketFlag(fs, &f.socket)
	fs.StringVar(&f.owner, "owner", "", "the session's owner (create; default \"default\"), or list only this owner's")
	fs.StringVar(&f.mode, "mode", "", "create: the session's mode (default \"default\")")
	fs.StringVar(&f.interpreter, "interpreter", "", "create: absolute `path` of python3 (default: the daemon's)")
	fs.StringVar(&f.cwd, "cwd", "", "create: absolute working `dir` (default: the kernel's staging dir)")
	fs.StringVar(&f.tools, "tools", "", "create: the session's tool set, `a,b` (fixed for its life)")
	addEnvFlag(fs, &f.env, "create: an environment value of the session's kernel")
	fs.BoolVar(&f.asJSON, "json", false, "print the session (or {\"sessions\": [...]}) as JSON")
	return func(ctx context.Context, e *env, args []string) int { return runSessions(ctx, e, &f, args) }
}

// addEnvFlag defines the repeatable --env NAME=VALUE (or NAME).
func addEnvFlag(fs *pflag.FlagSet, p *[]string, usage string) {
	fs.StringArrayVar(p, "env", nil, usage+", `NAME=VALUE` or NAME (its value here); repeatable")
}

// parseEnv turns --env flags into a map: NAME=VALUE, or NAME for the
// value of NAME in this command's environment (an unset NAME is an error).
func parseEnv(flags []string, getenv func(string) string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			value = getenv(name)
			if value == "" {
				return nil, fmt.Errorf("--env %s: %s is not set in this environment (give NAME=VALUE)", name, name)
			}
		}
		if name == "" {
			return nil, fmt.Errorf("--env %q: the name is empty", f)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--env %s is given twice", name)
		}
		out[name] = value
	}
	return out, nil
}

func runSessions(ctx context.Context, e *env, f *sessionFlags, args []string) int {
	e.json = f.asJSON
	action, id := "", ""
	if len(args) > 0 {
		action = args[0]
	}
	switch {
	case action == "" || action == "create":
		if len(args) > 1 {
			return usageError(e, "sessions", "unexpected argument %q", args[1])
		}
	case action == "show" || action == "restart" || action == "delete":
		if len(args) != 2 {
			return usageError(e, "sessions", "%s needs exactly one session ID (see 'kernpool sessions')", action)
		}
		id = args[1]
	default:
		return usageError(e, "sessions", "unknown action %q (create, show, restart or delete)", action)
	}
	if action != "create" && (f.mode != "" || f.interpreter != "" || f.cwd != "" || f.tools != "" || len(f.env) > 0) {
		return usageError(e, "sessions", "--mode, --interpreter, --cwd, --tools and --env go with create")
	}
	client := api.NewClient(socketPath(f.socket, e.getenv))
	defer client.CloseIdleConnections()
	switch action {
	case "":
		list, err := client.Sessions(ctx, f.owner)
		if err != nil {
			return connError(e, "sessions", err)
		}
		if f.asJSON {
			return printJSON(e, api.SessionList{Sessions: list})
		}
		printSessionTable(e, list)
	case "create":
		envs, err := parseEnv(f.env, e.getenv)
		if err != nil {
			return usageError(e, "sessions", "%v", err)
		}
		s, err := client.CreateSession(ctx, pool.SessionSpec{Owner: f.owner, Mode: f.mode, Interpreter: f.interpreter,
			Cwd: f.cwd, Tools: splitList(f.tools), Env: envs})
		if err != nil {
			return sessionError(e, err)
		}
		if f.asJSON {
			return printJSON(e, s)
		}
		fmt.Fprintln(e.stdout, s.ID)
	case "show":
		s, err := client.Session(ctx, id)
		if err != nil {
			return sessionError(e, err)
		}
		if f.asJSON {
			return printJSON(e, s)
		}
		printSessionTable(e, []pool.SessionInfo{*s})
	case "restart":
		killed, err := client.RestartSession(ctx, id)
		if err != nil {
			return sessionError(e, err)
		}
		if f.asJSON {
			return printJSON(e, api.SessionRestarted{Session: id, Killed: killed})
		}
		fmt.Fprintf(e.stdout, "restarted %s\n", id)
	case "delete":
		if err := client.DeleteSession(ctx, id); err != nil {
			return sessionError(e, err)
		}
		if f.asJSON {
			return printJSON(e, api.SessionDeleted{Deleted: id})
		}
		fmt.Fprintf(e.stdout, "deleted %s\n", id)
	}
	return exitOK
}

// sessionError reports a refused session call: exit 1 for what the
// daemon refused (no such session, a bad request), 4 for a quota, else 2.
func sessionError(e *env, err error) int {
	switch {
	case errors.Is(err, pool.ErrQuota):
		return fail(e, "sessions", err, "", exitRetry)
	case errors.Is(err, pool.ErrNotFound), errors.Is(err, pool.ErrBadRequest):
		return fail(e, "sessions", err, "", exitCellErr)
	}
	return connError(e, "sessions", err)
}

func printJSON(e *env, v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return exitOK
}

// printSessionTable prints ID OWNER MODE TOOLS ENV KERNEL IDLE.
func printSessionTable(e *env, list []pool.SessionInfo) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOWNER\tMODE\tTOOLS\tENV\tKERNEL\tIDLE")
	for _, s := range list {
		kernel := s.KernelID
		if kernel == "" {
			kernel = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Owner, s.Mode, dash(strings.Join(s.Tools, ",")),
			dash(strings.Join(s.EnvNames, ",")), kernel, formatSeconds(time.Since(s.LastUsed).Seconds()))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
