package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
	"github.com/kernpool/kernpool/pool/daemon"
	"github.com/spf13/pflag"
)

func psFlags(fs *pflag.FlagSet) runFunc {
	socket := new(string)
	addSocketFlag(fs, socket)
	asJSON := fs.Bool("json", false, `print {"kernels": [...], "checkpoints": [...]} as JSON`)
	return func(ctx context.Context, e *env, args []string) int { return runPs(ctx, e, *socket, *asJSON, args) }
}

func runPs(ctx context.Context, e *env, socket string, asJSON bool, args []string) int {
	e.json = asJSON
	if len(args) > 0 {
		return usageError(e, "ps", "unexpected argument %q", args[0])
	}
	client := api.NewClient(socketPath(socket, e.getenv))
	defer client.CloseIdleConnections()
	list, err := client.Listing(ctx)
	if err != nil {
		return connError(e, "ps", err)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(list)
		return exitOK
	}
	printKernelTable(e, list.Kernels)
	printCheckpointTable(e, list.Checkpoints)
	return exitOK
}

// printCheckpointTable prints the stored checkpoints (persist = true)
// after a blank line, when there are any: OWNER MODE SIZE NAMES LOST
// REASON SAVED (age) and NOTE (why a state was not saved).
func printCheckpointTable(e *env, ckpts []pool.CheckpointInfo) {
	if len(ckpts) == 0 {
		return
	}
	fmt.Fprintln(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECKPOINT OWNER\tMODE\tSIZE\tNAMES\tLOST\tREASON\tSAVED\tNOTE")
	for _, c := range ckpts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s ago\t%s\n", c.Owner, c.Mode, humanBytes(c.Bytes), c.Names, c.Lost,
			c.Reason, formatSeconds(time.Since(c.SavedAt).Seconds()), c.Refused)
	}
	_ = tw.Flush()
}

// printKernelTable prints ID OWNER MODE PID IDLE EXEC BUSY, plus SESSION
// when any kernel serves an explicit session, MEM,
// PIDS and CPU when any kernel has cgroup figures, DROPPED (output written
// while no cell ran) when any kernel dropped some, and last ISOLATION:
// what is enforced (kernel.Isolation.Summary, the result's
// kernel.isolation on one line).
func printKernelTable(e *env, kernels []pool.KernelInfo) {
	withStats, withDropped, withSession := false, false, false
	for _, k := range kernels {
		withSession = withSession || k.Session != ""
		if k.MemoryCurrent > 0 || k.Pids > 0 || k.CPUSeconds > 0 {
			withStats = true
		}
		withDropped = withDropped || k.DroppedOutputBytes > 0
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "ID\tOWNER\tMODE\tPID\tIDLE\tEXEC\tBUSY")
	if withSession {
		fmt.Fprint(tw, "\tSESSION")
	}
	if withStats {
		fmt.Fprint(tw, "\tMEM\tPIDS\tCPU")
	}
	if withDropped {
		fmt.Fprint(tw, "\tDROPPED")
	}
	fmt.Fprintln(tw, "\tISOLATION")
	for _, k := range kernels {
		owner := k.Owner
		if k.Spare {
			owner = "(spare)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s", k.ID, owner, k.Mode, k.Pid,
			formatSeconds(k.IdleSeconds), k.ExecutionCount, yesNo(k.Busy))
		if withSession {
			fmt.Fprintf(tw, "\t%s", dash(k.Session))
		}
		if withStats {
			fmt.Fprintf(tw, "\t%s\t%d\t%s", humanBytes(k.MemoryCurrent), k.Pids, formatSeconds(k.CPUSeconds))
		}
		if withDropped {
			fmt.Fprintf(tw, "\t%s", humanBytes(k.DroppedOutputBytes))
		}
		fmt.Fprintln(tw, "\t"+k.Isolation.Summary())
	}
	_ = tw.Flush()
}

func shutdownFlags(fs *pflag.FlagSet) runFunc {
	socket := new(string)
	addSocketFlag(fs, socket)
	owner := fs.String("owner", "", "owner whose kernels to kill (required)")
	return func(ctx context.Context, e *env, args []string) int {
		return runShutdown(ctx, e, *socket, *owner, args)
	}
}

func runShutdown(ctx context.Context, e *env, socket, owner string, args []string) int {
	if owner == "" {
		return usageError(e, "shutdown", "--owner is required")
	}
	if len(args) > 0 {
		return usageError(e, "shutdown", "unexpected argument %q", args[0])
	}
	client := api.NewClient(socketPath(socket, e.getenv))
	defer client.CloseIdleConnections()
	n, err := client.ShutdownOwner(ctx, owner)
	if err != nil {
		return connError(e, "shutdown", err)
	}
	fmt.Fprintf(e.stdout, "killed %d kernel(s) of owner %s\n", n, owner)
	return exitOK
}

func runKill(ctx context.Context, e *env, socket string, args []string) int {
	if len(args) != 1 {
		return usageError(e, "kill", "expected exactly one KERNEL_ID (see 'kernpool ps')")
	}
	client := api.NewClient(socketPath(socket, e.getenv))
	defer client.CloseIdleConnections()
	if err := client.Kill(ctx, args[0]); err != nil {
		if errors.Is(err, pool.ErrNotFound) {
			fmt.Fprintf(e.stderr, "kernpool kill: no live kernel %q\n", args[0])
			return exitCellErr
		}
		return connError(e, "kill", err)
	}
	fmt.Fprintf(e.stdout, "killed %s\n", args[0])
	return exitOK
}

func doctorFlags(fs *pflag.FlagSet) runFunc {
	sf := addServeFlags(fs)
	return func(ctx context.Context, e *env, args []string) int { return runDoctor(ctx, e, sf, args) }
}

func runDoctor(ctx context.Context, e *env, sf *serveFlags, args []string) int {
	if len(args) > 0 {
		return usageError(e, "doctor", "unexpected argument %q", args[0])
	}
	cfg, err := loadServeConfig(sf, e.getenv)
	if err != nil {
		return usageError(e, "doctor", "%v", err)
	}
	client := api.NewClient(cfg.Socket)
	defer client.CloseIdleConnections()
	h, healthErr := client.Health(ctx)
	// A daemon that answers runs with its own settings, not this
	// command's flag defaults: print those (an older daemon has no
	// /v1/settings; then the flags' are printed, and say so).
	var live *api.Settings
	if healthErr == nil {
		live, _ = client.Settings(ctx)
	}
	report, isolationOK := daemon.Doctor(ctx, cfg, live, buildVersion().Version)
	fmt.Fprint(e.stdout, report)
	if healthErr == nil {
		kernels, err := client.List(ctx)
		if err != nil {
			fmt.Fprintf(e.stdout, "daemon:       %s, version %s, isolation %s (listing its kernels failed: %v)\n", h.Status, h.Version, h.Isolation, err)
			return exitOK
		}
		spares := 0
		for _, k := range kernels {
			if k.Spare {
				spares++
			}
		}
		fmt.Fprintf(e.stdout, "daemon:       %s, version %s, %d kernel(s) and %d warm spare(s), isolation %s\n",
			h.Status, h.Version, len(kernels)-spares, spares, h.Isolation)
		// What each live kernel really has: the same line as `kernpool ps`.
		for _, k := range kernels {
			owner := "owner " + k.Owner
			if k.Spare {
				owner = "warm spare"
			}
			fmt.Fprintf(e.stdout, "kernel %s:  %s, mode %s: %s\n", k.ID, owner, k.Mode, k.Isolation.Summary())
		}
	} else {
		fmt.Fprintf(e.stdout, "daemon:       not reachable on %s\n", cfg.Socket)
		if isolationOK {
			return exitNoDaemon
		}
	}
	if !isolationOK {
		return exitCellErr // the isolation the config asks for is not available
	}
	return exitOK
}

// connError prints a failed API call: exit 4 when the daemon refused it
// for now (capacity, a per-owner quota, its connection cap), else 2
// (usage or connection).
func connError(e *env, cmd string, err error) int {
	var ae *api.APIError
	switch {
	case errors.Is(err, pool.ErrQuota):
		// The quota's message says what frees it (and when).
		return fail(e, cmd, err, "", exitRetry)
	case errors.Is(err, pool.ErrCapacity), errors.As(err, &ae) && ae.Code == api.CodeTooManyConnections:
		hint := ""
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			hint = fmt.Sprintf("Retry in %s.", ae.RetryAfter)
		}
		return fail(e, cmd, err, hint, exitRetry)
	}
	return fail(e, cmd, err, connHint(err), exitUsage)
}

func formatSeconds(s float64) string {
	switch {
	case s < 60:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	}
	return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)%3600/60)
}

// humanBytes renders a usage figure with one decimal (12.5MiB).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	v, i := float64(n), 0
	suffixes := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	for v >= unit && i < len(suffixes)-1 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + suffixes[i]
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
