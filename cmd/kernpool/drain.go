package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool/api"
)

func drainCommand() command {
	return command{name: "drain", summary: "drain the daemon: refuse cells, save persist kernels, exit", setup: drainFlags,
		long: "Drain asks the daemon to drain (POST /v1/drain): cells of new and existing owners are\n" +
			"refused with code draining (a router places the owner on another node), running\n" +
			"cells may finish within drain_grace, every kernel of a persist profile is saved,\n" +
			"then the daemon exits. Drain prints the progress until the daemon is drained.\n" +
			"Exit 0: every persist kernel was saved; 1: some were not (the daemon's log says\n" +
			"why) or the daemon went away before it said it was drained; 2: no daemon."}
}

func drainFlags(fs *pflag.FlagSet) runFunc {
	socket := new(string)
	addSocketFlag(fs, socket)
	noWait := fs.Bool("no-wait", false, "start the drain and return without following it")
	url := fs.String("url", "", "drain the node at this `URL` (https://host:port, its network listener) instead of the socket; the admin token comes from $KERNPOOL_TOKEN")
	var opts api.NetworkOptions
	fs.StringVar(&opts.CAFile, "ca", "", "PEM `file` of the CA that signed the node's certificate (default: the system's roots)")
	fs.StringVar(&opts.CertFile, "cert", "", "client certificate `file` (PEM) for mutual TLS")
	fs.StringVar(&opts.KeyFile, "key", "", "the client certificate's key `file` (PEM)")
	return func(ctx context.Context, e *env, args []string) int {
		if len(args) > 0 {
			return usageError(e, "drain", "unexpected argument %q", args[0])
		}
		client := api.NewClient(socketPath(*socket, e.getenv))
		if *url != "" {
			opts.Token = e.getenv("KERNPOOL_TOKEN")
			var err error
			if client, err = api.NewNetworkClient(*url, opts); err != nil {
				return usageError(e, "drain", "%v", err)
			}
		}
		defer client.CloseIdleConnections()
		return runDrain(ctx, e, client, *noWait)
	}
}

func runDrain(ctx context.Context, e *env, client *api.Client, noWait bool) int {
	var progress func(api.DrainStatus)
	if !noWait {
		progress = func(st api.DrainStatus) { fmt.Fprintln(e.stdout, drainLine(st)) }
	}
	st, err := client.Drain(ctx, progress)
	if err != nil && st == nil {
		return connError(e, "drain", err)
	}
	if noWait {
		fmt.Fprintln(e.stdout, drainLine(*st))
		return exitOK
	}
	switch {
	case err != nil:
		fmt.Fprintf(e.stderr, "kernpool drain: %v\n", err)
		return exitCellErr
	case st.State != api.StateDrained:
		fmt.Fprintln(e.stderr, "kernpool drain: the daemon went away before it reported the drain finished; see its log")
		return exitCellErr
	case st.Failed > 0:
		fmt.Fprintf(e.stderr, "kernpool drain: %d of %d persist kernels were not saved; see the daemon's log\n", st.Failed, st.KernelsToSave)
		return exitCellErr
	}
	return exitOK
}

// drainLine is one progress line: "draining: 2 cells running, 40 of 100
// persist kernels saved, 0 failed, 60 remaining".
func drainLine(st api.DrainStatus) string {
	return fmt.Sprintf("%s: %d cells running, %d of %d persist kernels saved, %d failed, %d remaining",
		st.State, st.CellsRunning, st.Saved, st.KernelsToSave, st.Failed, st.Remaining)
}

func tokenCommand() command {
	return command{name: "token", args: "NAME", summary: "make a bearer token for the network listener", setup: tokenFlags,
		long: "Token prints a new random bearer token (256 bits) and the config block that\n" +
			"accepts it: the config keeps only the token's SHA-256 (docs/fleet.md). Give the\n" +
			"token to the client; paste the block into the daemon's config and reload (SIGHUP)."}
}

func tokenFlags(fs *pflag.FlagSet) runFunc {
	owners := fs.String("owners", "", "owners the token may act for, `A[,B...]`")
	prefixes := fs.String("owner-prefixes", "", "owner prefixes the token may act for, `P[,Q...]`")
	admin := fs.Bool("admin", false, "the token may act for every owner and drain the node")
	return func(_ context.Context, e *env, args []string) int {
		if len(args) != 1 {
			return usageError(e, "token", "expected one NAME, got %d arguments", len(args))
		}
		os, ps := splitList(*owners), splitList(*prefixes)
		if *admin == (len(os) > 0 || len(ps) > 0) {
			return usageError(e, "token", "give --admin, or --owners / --owner-prefixes (not both, not neither)")
		}
		var buf [32]byte
		_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails (Go 1.24+)
		tok := "kp_" + hex.EncodeToString(buf[:])
		fmt.Fprintf(e.stdout, "%s\n", tok)
		fmt.Fprintf(e.stderr, "# The daemon's config (it keeps the token's SHA-256 only):\ntoken %s {\n  sha256 = %q\n", strconv.Quote(args[0]), api.TokenDigest(tok))
		switch {
		case *admin:
			fmt.Fprintln(e.stderr, "  admin  = true")
		default:
			if len(os) > 0 {
				fmt.Fprintf(e.stderr, "  owners = %s\n", hclList(os))
			}
			if len(ps) > 0 {
				fmt.Fprintf(e.stderr, "  owner_prefixes = %s\n", hclList(ps))
			}
		}
		fmt.Fprintln(e.stderr, "}")
		return exitOK
	}
}

func hclList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
