package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// kernelSelector is the flags of a command that takes a KERNEL_ID or
// --owner [--mode].
type kernelSelector struct{ socket, owner, mode, session string }

func interruptFlags(fs *pflag.FlagSet) runFunc {
	var k kernelSelector
	addSocketFlag(fs, &k.socket)
	fs.StringVar(&k.owner, "owner", "", "interrupt the running cells of this owner's kernels")
	fs.StringVar(&k.mode, "mode", "", "with --owner: only the kernels of this mode")
	fs.StringVar(&k.session, "session", "", "interrupt the running cell of the session `ID`")
	return func(ctx context.Context, e *env, args []string) int {
		if k.session != "" {
			return runInterruptSession(ctx, e, k, args)
		}
		return runInterrupt(ctx, e, k, args)
	}
}

func runInterrupt(ctx context.Context, e *env, k kernelSelector, args []string) int {
	socket, owner, mode := &k.socket, &k.owner, &k.mode
	if (*owner == "") == (len(args) != 1) || len(args) > 1 {
		return usageError(e, "interrupt", "expected exactly one KERNEL_ID (see 'kernpool ps'), --owner or --session")
	}
	if *mode != "" && *owner == "" {
		return usageError(e, "interrupt", "--mode needs --owner")
	}
	client := api.NewClient(socketPath(*socket, e.getenv))
	defer client.CloseIdleConnections()
	if *owner != "" {
		ids, err := client.InterruptOwner(ctx, *owner, *mode)
		if err != nil {
			return connError(e, "interrupt", err)
		}
		if len(ids) == 0 {
			fmt.Fprintf(e.stderr, "kernpool interrupt: no running cell of owner %q\n", *owner)
			return exitCellErr
		}
		for _, id := range ids {
			fmt.Fprintf(e.stdout, "interrupted %s\n", id)
		}
		return exitOK
	}
	id := ""
	if len(args) == 1 {
		id = args[0]
	}
	switch err := client.Interrupt(ctx, id); {
	case errors.Is(err, pool.ErrNotFound):
		fmt.Fprintf(e.stderr, "kernpool interrupt: no live kernel %q\n", id)
		return exitCellErr
	case errors.Is(err, pool.ErrIdle):
		fmt.Fprintf(e.stderr, "kernpool interrupt: kernel %s runs no cell\n", id)
		return exitCellErr
	case err != nil:
		return connError(e, "interrupt", err)
	}
	fmt.Fprintf(e.stdout, "interrupted %s\n", id)
	return exitOK
}

func varsFlags(fs *pflag.FlagSet) runFunc {
	var k kernelSelector
	addSocketFlag(fs, &k.socket)
	fs.StringVar(&k.owner, "owner", "", "list the variables of this owner's kernel")
	fs.StringVar(&k.mode, "mode", "", "with --owner: the kernel of this mode (default \"default\")")
	fs.StringVar(&k.session, "session", "", "list the variables of the session `ID`'s kernel")
	asJSON := fs.Bool("json", false, `print {"variables": [...], "total": N} as JSON`)
	return func(ctx context.Context, e *env, args []string) int { return runVars(ctx, e, k, *asJSON, args) }
}

func runVars(ctx context.Context, e *env, k kernelSelector, asJSON bool, args []string) int {
	socket, owner, mode := &k.socket, &k.owner, &k.mode
	e.json = asJSON
	if k.session != "" {
		return runSessionVars(ctx, e, k, asJSON, args)
	}
	if (*owner == "") == (len(args) != 1) || len(args) > 1 {
		return usageError(e, "vars", "expected exactly one KERNEL_ID (see 'kernpool ps'), --owner or --session")
	}
	client := api.NewClient(socketPath(*socket, e.getenv))
	defer client.CloseIdleConnections()
	id := ""
	if len(args) == 1 {
		id = args[0]
	}
	if *owner != "" {
		var err error
		if id, err = kernelOf(ctx, client, *owner, *mode); err != nil {
			if errors.Is(err, pool.ErrNotFound) {
				return fail(e, "vars", err, "", exitCellErr)
			}
			return connError(e, "vars", err)
		}
	}
	v, err := client.Variables(ctx, id)
	switch {
	case errors.Is(err, pool.ErrNotFound):
		return fail(e, "vars", fmt.Errorf("no live kernel %q", id), "", exitCellErr)
	case errors.Is(err, pool.ErrBusy):
		return fail(e, "vars", fmt.Errorf("kernel %s is running a cell", id), "Try again when it ends.", exitCellErr)
	case err != nil:
		return varsError(ctx, e, err)
	}
	return printVars(e, v, asJSON)
}

// varsError reports a listing that did not come back and picks the exit
// code: 3 when the daemon's time bound, an interrupt or Ctrl-C stopped it
// (the daemon's message says whether the kernel kept its state or was
// killed) or a repr ended the kernel (os._exit, the OOM killer), else
// connError's. No such kernel, busy and idle are the
// callers', which name the kernel or the session.
func varsError(ctx context.Context, e *env, err error) int {
	switch {
	case ctx.Err() != nil:
		return fail(e, "vars", errors.New("interrupted; the daemon interrupts the listing and the kernel keeps its state unless a __repr__ does not stop within its grace"), "", exitKilled)
	case errors.Is(err, pool.ErrTimeout):
		return fail(e, "vars", listingStopped("the listing timed out", err), "", exitKilled)
	case errors.Is(err, pool.ErrInterrupted):
		return fail(e, "vars", listingStopped("an interrupt stopped the listing", err), "", exitKilled)
	case errors.Is(err, pool.ErrKernelDied):
		return fail(e, "vars", listingStopped("a __repr__ ended the kernel during the listing; its state is lost", err), "", exitKilled)
	}
	return connError(e, "vars", err)
}

// listingStopped says what stopped a listing, then the daemon's message
// (without the client's operation prefix; --json still finds its code).
func listingStopped(what string, err error) error {
	var ae *api.APIError
	if errors.As(err, &ae) {
		err = ae
	}
	return fmt.Errorf("%s: %w", what, err)
}

// printVars prints a variables listing as a table or (asJSON) as JSON.
func printVars(e *env, v *pool.Variables, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tSIZE\tVALUE")
	for _, x := range v.Variables {
		size := ""
		if x.Len != nil {
			size = fmt.Sprintf("len %d", *x.Len)
		}
		if x.Bytes != nil {
			size = humanBytes(*x.Bytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.Name, x.Type, size, x.Repr)
	}
	_ = tw.Flush()
	if v.Total > len(v.Variables) {
		fmt.Fprintf(e.stdout, "(%d more not listed)\n", v.Total-len(v.Variables))
	}
	return exitOK
}

// kernelOf finds the live kernel of owner and mode (several: with other
// interpreters, cwds or tool sets, the most recently used one); explicit
// sessions' kernels are addressed by --session, never by owner.
func kernelOf(ctx context.Context, c *api.Client, owner, mode string) (string, error) {
	if mode == "" {
		mode = "default"
	}
	ks, err := c.List(ctx)
	if err != nil {
		return "", err
	}
	best, idle := "", -1.0
	for _, k := range ks {
		if k.Owner == owner && k.Mode == mode && k.Session == "" && (best == "" || k.IdleSeconds < idle) {
			best, idle = k.ID, k.IdleSeconds
		}
	}
	if best == "" {
		return "", fmt.Errorf("no live kernel of owner %q in mode %q: %w", owner, mode, pool.ErrNotFound)
	}
	return best, nil
}

// runInterruptSession interrupts the running cell of a session.
func runInterruptSession(ctx context.Context, e *env, k kernelSelector, args []string) int {
	if len(args) > 0 || k.owner != "" || k.mode != "" {
		return usageError(e, "interrupt", "--session takes no KERNEL_ID, --owner or --mode")
	}
	client := api.NewClient(socketPath(k.socket, e.getenv))
	defer client.CloseIdleConnections()
	switch err := client.InterruptSession(ctx, k.session); {
	case errors.Is(err, pool.ErrNotFound):
		return fail(e, "interrupt", fmt.Errorf("no session %q", k.session), "", exitCellErr)
	case errors.Is(err, pool.ErrIdle):
		return fail(e, "interrupt", fmt.Errorf("session %s runs no cell", k.session), "", exitCellErr)
	case err != nil:
		return connError(e, "interrupt", err)
	}
	fmt.Fprintf(e.stdout, "interrupted %s\n", k.session)
	return exitOK
}

// runSessionVars lists the variables of a session's kernel.
func runSessionVars(ctx context.Context, e *env, k kernelSelector, asJSON bool, args []string) int {
	if len(args) > 0 || k.owner != "" || k.mode != "" {
		return usageError(e, "vars", "--session takes no KERNEL_ID, --owner or --mode")
	}
	client := api.NewClient(socketPath(k.socket, e.getenv))
	defer client.CloseIdleConnections()
	v, err := client.SessionVariables(ctx, k.session)
	switch {
	case errors.Is(err, pool.ErrNotFound):
		return fail(e, "vars", fmt.Errorf("no session %q", k.session), "", exitCellErr)
	case errors.Is(err, pool.ErrIdle):
		return fail(e, "vars", fmt.Errorf("session %s has no live kernel", k.session), "Its next cell starts one.", exitCellErr)
	case errors.Is(err, pool.ErrBusy):
		return fail(e, "vars", fmt.Errorf("session %s is running a cell", k.session), "Try again when it ends.", exitCellErr)
	case err != nil:
		return varsError(ctx, e, err)
	}
	return printVars(e, v, asJSON)
}
