package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// runSpill prints the spill file NAME of kernel ID (a result names both:
// kernel.id and stdout_spill_name) on stdout.
func runSpill(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "spill", "[--socket PATH] KERNEL_ID NAME")
	socket := fs.String("socket", "", "daemon socket (default $KERNPOOL_SOCKET, else the default path)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 2 {
		return usageError(e, fs, "expected KERNEL_ID and NAME (a result's kernel.id and stdout_spill_name)")
	}
	client := api.NewClient(socketPath(*socket, e.getenv))
	defer client.CloseIdleConnections()
	if _, err := client.Spill(ctx, fs.Arg(0), fs.Arg(1), e.stdout); err != nil {
		switch {
		case errors.Is(err, pool.ErrNotFound):
			fmt.Fprintf(e.stderr, "kernpool spill: no spill %q of a live kernel %q\n", fs.Arg(1), fs.Arg(0))
			return exitCellErr
		case errors.Is(err, pool.ErrBadRequest):
			return usageError(e, fs, "%v", err)
		}
		return connError(e, "spill", err)
	}
	return exitOK
}
