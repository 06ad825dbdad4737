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
func runSpill(ctx context.Context, e *env, socket string, args []string) int {
	if len(args) != 2 {
		return usageError(e, "spill", "expected KERNEL_ID and NAME (a result's kernel.id and stdout_spill_name)")
	}
	client := api.NewClient(socketPath(socket, e.getenv))
	defer client.CloseIdleConnections()
	if _, err := client.Spill(ctx, args[0], args[1], e.stdout); err != nil {
		switch {
		case errors.Is(err, pool.ErrNotFound):
			fmt.Fprintf(e.stderr, "kernpool spill: no spill %q of a live kernel %q\n", args[1], args[0])
			return exitCellErr
		case errors.Is(err, pool.ErrBadRequest):
			return usageError(e, "spill", "%v", err)
		}
		return connError(e, "spill", err)
	}
	return exitOK
}
