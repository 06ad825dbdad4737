package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// cpArgs is the synopsis of kernpool cp.
const cpArgs = "(LOCAL OWNER:PATH | OWNER:PATH LOCAL)"

// cpLong documents the remote side's syntax.
const cpLong = `Copy a file into or out of a kernel's working dir (its cwd, else its staging dir).
The remote side is OWNER:PATH: the owner's live kernel of --mode (default
"default"; the most recently used when several match), or :PATH with
--kernel ID or --session ID (the session's live kernel: run its first
cell before copying in; a copy never starts a kernel). PATH is relative to the working dir; an upload to a PATH that
ends in "/" keeps the local file's name. LOCAL "-" is stdin or stdout; a
local path with a colon is written ./a:b. The daemon reads and writes as
the kernel's uid and never follows a symlink there.`

type cpOptions struct{ socket, mode, kernel, session string }

func cpFlags(fs *pflag.FlagSet) runFunc {
	var o cpOptions
	addSocketFlag(fs, &o.socket)
	fs.StringVar(&o.mode, "mode", "", "the owner's kernel of this mode (default \"default\")")
	fs.StringVar(&o.kernel, "kernel", "", "the kernel `ID` (the remote side is then :PATH)")
	fs.StringVar(&o.session, "session", "", "the live kernel of the session `ID` (the remote side is then :PATH)")
	return func(ctx context.Context, e *env, args []string) int { return runCp(ctx, e, o, args) }
}

// remoteSpec splits OWNER:PATH; ok is false for a local path (no colon
// before the first slash, or "-").
func remoteSpec(s string) (owner, p string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i < 0 || (strings.IndexByte(s, '/') >= 0 && strings.IndexByte(s, '/') < i) {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func runCp(ctx context.Context, e *env, o cpOptions, args []string) int {
	if len(args) != 2 {
		return usageError(e, "cp", "expected a source and a destination: %s", cpArgs)
	}
	srcOwner, srcPath, srcRemote := remoteSpec(args[0])
	dstOwner, dstPath, dstRemote := remoteSpec(args[1])
	if srcRemote == dstRemote {
		return usageError(e, "cp", "exactly one side must be remote (OWNER:PATH), the other local")
	}
	owner, rpath, local := dstOwner, dstPath, args[0]
	if srcRemote {
		owner, rpath, local = srcOwner, srcPath, args[1]
	}
	switch {
	case o.kernel != "" && o.session != "":
		return usageError(e, "cp", "name the kernel by --kernel ID or by --session ID, not both")
	case (owner == "") == (o.kernel == "" && o.session == ""):
		return usageError(e, "cp", "name the kernel by OWNER:PATH or by --kernel ID or --session ID with :PATH, not both or neither")
	case o.session != "" && o.mode != "":
		return usageError(e, "cp", "--mode goes with OWNER:PATH, not --session (the session has its mode)")
	case rpath == "" && srcRemote:
		return usageError(e, "cp", "the remote side names no path")
	}
	client := api.NewClient(socketPath(o.socket, e.getenv))
	defer client.CloseIdleConnections()
	if o.session != "" {
		return cpBy(ctx, e, client, api.FileTarget{Session: o.session}, srcRemote, rpath, local)
	}
	id := o.kernel
	if id == "" {
		var err error
		if id, err = kernelOf(ctx, client, owner, o.mode); err != nil {
			if errors.Is(err, pool.ErrNotFound) {
				return fail(e, "cp", err, "Run a cell for the owner first (kernpool exec --owner).", exitCellErr)
			}
			return connError(e, "cp", err)
		}
	}
	return cpBy(ctx, e, client, api.FileTarget{Kernel: id}, srcRemote, rpath, local)
}

// cpBy copies rpath of target t out to local (down) or local in to it.
func cpBy(ctx context.Context, e *env, c *api.Client, t api.FileTarget, down bool, rpath, local string) int {
	if down {
		return cpDownload(ctx, e, c, t, rpath, local)
	}
	return cpUpload(ctx, e, c, t, local, rpath)
}

func cpUpload(ctx context.Context, e *env, c *api.Client, t api.FileTarget, local, rpath string) int {
	var r io.Reader = e.stdin
	size := int64(-1)
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			return usageError(e, "cp", "%v", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return usageError(e, "cp", "%s is not a regular file", local)
		}
		r, size = f, fi.Size()
		if rpath == "" || strings.HasSuffix(rpath, "/") {
			rpath += filepath.Base(local)
		}
	} else if rpath == "" || strings.HasSuffix(rpath, "/") {
		return usageError(e, "cp", "an upload from stdin needs a file name on the remote side")
	}
	if _, err := c.UploadFile(ctx, t, rpath, r, size); err != nil {
		return cpError(e, err)
	}
	return exitOK
}

func cpDownload(ctx context.Context, e *env, c *api.Client, t api.FileTarget, rpath, local string) int {
	if local == "-" {
		if _, err := c.DownloadFile(ctx, t, rpath, e.stdout); err != nil {
			return cpError(e, err)
		}
		return exitOK
	}
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		local = filepath.Join(local, path.Base(rpath))
	}
	// Into a temporary file beside the target, renamed when whole: a
	// failed copy leaves the local file as it was.
	f, err := os.CreateTemp(filepath.Dir(local), ".kernpool-cp-*")
	if err != nil {
		return usageError(e, "cp", "%v", err)
	}
	_, err = c.DownloadFile(ctx, t, rpath, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), local)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return cpError(e, err)
	}
	return exitOK
}

// cpError maps a failed copy onto the exit codes: 1 for what the kernel's
// side refused (no such kernel or file, too large, no space, not a
// regular file, not allowed), 2 for a bad path or no daemon.
func cpError(e *env, err error) int {
	var ae *api.APIError
	switch {
	case errors.As(err, &ae) && ae.Code == api.CodeBadRequest:
		return usageError(e, "cp", "%v", err)
	case errors.As(err, &ae) && ae.Code != api.CodeInternal:
		return fail(e, "cp", err, "", exitCellErr)
	case ae == nil && !errors.Is(err, api.ErrUnavailable):
		return fail(e, "cp", err, "", exitCellErr)
	}
	return connError(e, "cp", err)
}
