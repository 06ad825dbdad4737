package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool/daemon"
	"github.com/kernpool/kernpool/units"
)

// durationValue is a flag holding a duration: Go syntax ("30s", "5m",
// "1h30m") or a number of seconds ("90", "0.5"), as in the config file.
type durationValue struct{ p *time.Duration }

func newDuration(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationValue{p}, name, usage)
}

func (d durationValue) String() string {
	if d.p == nil || *d.p == 0 {
		return "0" // pflag shows no default for "0"
	}
	return formatDuration(*d.p)
}

func (d durationValue) Set(s string) error {
	v, err := daemon.ParseDuration(s)
	if err != nil {
		return flagValueError(err, s)
	}
	*d.p = v
	return nil
}

func (durationValue) Type() string { return "duration" }

// formatDuration is time.Duration's form without zero tails: 30m, 1h, 2s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sizeValue is a flag holding a size in bytes ("64MiB", "1GB", "1048576";
// units.ParseSize), shown as 512MiB.
type sizeValue struct{ p *int64 }

func newSize(fs *pflag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var(sizeValue{p}, name, usage)
}

func (v sizeValue) String() string {
	if v.p == nil || *v.p == 0 {
		return "0"
	}
	return units.FormatBytes(*v.p)
}

func (v sizeValue) Set(s string) error {
	n, err := units.ParseSize(s)
	if err != nil {
		return flagValueError(err, s)
	}
	*v.p = n
	return nil
}

func (sizeValue) Type() string { return "size" }

// flagValueError is a parse error without what pflag adds itself (the
// value and the flag name) or the config file's sentinel.
func flagValueError(err error, value string) error {
	msg := strings.TrimPrefix(err.Error(), daemon.ErrConfig.Error()+": ")
	q := strconv.Quote(value)
	if strings.Contains(msg, q+" is ") {
		msg = strings.Replace(msg, q+" is ", "", 1)
	} else {
		msg = strings.Replace(msg, q+" ", "", 1)
	}
	return flagError(msg)
}

type flagError string

func (e flagError) Error() string { return string(e) }

// normalizeArgs rewrites the single-dash long flags Go's flag package
// accepted ("-socket PATH", "-json", "-owner=bob") to the double-dash
// form, for the flags of the command args name (scripts and units
// written for the old parser keep working). Values, CODE, "-" (stdin)
// and everything after "--" are left alone.
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == root {
		return args
	}
	cmd.InitDefaultHelpFlag()
	fs := cmd.Flags()
	out := make([]string, 0, len(args))
	skipValue := false
	for i, a := range args {
		switch {
		case skipValue:
			skipValue = false
		case a == "--":
			return append(out, args[i:]...)
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			skipValue = !hasValue && takesValue(fs, name)
		case len(a) > 2 && a[0] == '-':
			name, _, hasValue := strings.Cut(a[1:], "=")
			if len(name) > 1 && fs.Lookup(name) != nil {
				a = "-" + a
				skipValue = !hasValue && takesValue(fs, name)
			}
		}
		out = append(out, a)
	}
	return out
}

// takesValue reports whether flag name needs a value (not a bool).
func takesValue(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.NoOptDefVal == ""
}

// registerCompletions offers the fixed values of the flags that have
// them to shell completion.
func registerCompletions(cmd *cobra.Command) {
	fixed := map[string][]string{
		"isolation":      isolationModeNames(),
		"timeout-action": {"interrupt", "kill"},
		"log-level":      {"trace", "debug", "info", "warn", "error"},
	}
	for name, values := range fixed {
		if cmd.Flags().Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
}

func isolationModeNames() []string {
	var names []string
	for _, m := range kernel.IsolationModes() {
		names = append(names, string(m))
	}
	return names
}

// addSocketFlag defines --socket, the daemon's socket, for a client command.
func addSocketFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "socket", "", "daemon socket `path` (default $KERNPOOL_SOCKET, else the default path)")
}

// socketOnly is the setup of a command whose only flag is --socket.
func socketOnly(run func(ctx context.Context, e *env, socket string, args []string) int) func(*pflag.FlagSet) runFunc {
	return func(fs *pflag.FlagSet) runFunc {
		socket := new(string)
		addSocketFlag(fs, socket)
		return func(ctx context.Context, e *env, args []string) int { return run(ctx, e, *socket, args) }
	}
}
