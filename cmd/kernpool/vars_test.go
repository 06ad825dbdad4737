//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestVarsErrorExitCodes: each answer of the variables endpoints other
// than no such kernel, busy and idle (the callers') maps to its documented
// exit code, as one line of text or, with --json, one JSON object naming
// the daemon's code.
func TestVarsErrorExitCodes(t *testing.T) {
	for _, tc := range []struct {
		status     int
		code, want string
		exit       int
	}{
		{http.StatusGatewayTimeout, api.CodeTimedOut, "kernpool vars: the listing timed out: ", exitKilled},
		{http.StatusConflict, api.CodeInterrupted, "kernpool vars: an interrupt stopped the listing: ", exitKilled},
		{http.StatusConflict, api.CodeKernelDied, "kernpool vars: a __repr__ ended the kernel during the listing; its state is lost: ", exitKilled},
		{http.StatusServiceUnavailable, api.CodeCapacity, "kernpool vars: variables: ", exitRetry},
		{http.StatusTooManyRequests, api.CodeQuota, "kernpool vars: variables: ", exitRetry},
		{http.StatusServiceUnavailable, api.CodeTooManyConnections, "kernpool vars: variables: ", exitRetry},
		{http.StatusServiceUnavailable, api.CodeClosed, "kernpool vars: variables: ", exitUsage},
		{http.StatusServiceUnavailable, api.CodeDraining, "kernpool vars: variables: ", exitUsage},
		{http.StatusInternalServerError, api.CodeInternal, "kernpool vars: variables: ", exitUsage},
	} {
		msg := `variables "k1": the daemon's message`
		// As the client returns it: the operation, then the answer.
		err := fmt.Errorf("variables: %w", &api.APIError{StatusCode: tc.status, Code: tc.code, Message: msg})
		for _, asJSON := range []bool{false, true} {
			var out, errb bytes.Buffer
			e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, json: asJSON}
			exit := varsError(context.Background(), e, err)
			line, _, _ := strings.Cut(errb.String(), "\n")
			if asJSON {
				var rep errorReport
				if jerr := json.Unmarshal(errb.Bytes(), &rep); jerr != nil || rep.Code != tc.code || rep.ExitCode != tc.exit {
					t.Errorf("%s --json: %q (%v), want code %s and exit_code %d", tc.code, errb.String(), jerr, tc.code, tc.exit)
				}
				line = rep.Error
			}
			if exit != tc.exit || line != tc.want+msg || out.Len() != 0 {
				t.Errorf("%s (json %v): exit %d, stderr %q; want exit %d and %q", tc.code, asJSON, exit, errb.String(), tc.exit, tc.want+msg)
			}
		}
	}
}

// A listing whose repr loops is stopped by the daemon's time bound, by an
// interrupt of its kernel (the kernel kept, or killed when the repr
// ignores SIGINT) or by Ctrl-C: `kernpool vars` exits 3 with one line
// saying what stopped it (one JSON object with --json), whichever way it
// named the kernel.
func TestVarsStoppedListingExits3(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bound     time.Duration // the daemon's VariablesTimeout
		ignore    bool          // the repr ignores SIGINT
		stop      string        // "interrupt", "ctrl-c" or "" (the bound)
		args      string        // "id", "owner" or "session"
		json      bool
		wantLines []string
	}{
		{"timeout", time.Second, false, "", "id", false, []string{"the listing timed out: ", "the kernel keeps its state"}},
		{"interrupted", testenv.Patience, false, "interrupt", "owner", true, []string{"an interrupt stopped the listing: ", "the kernel keeps its state"}},
		{"killed", testenv.Patience, true, "interrupt", "session", false, []string{"an interrupt stopped the listing: ", "the kernel was killed and its state is lost"}},
		{"ctrl-c", testenv.Patience, false, "ctrl-c", "session", true, []string{"interrupted; the daemon interrupts the listing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket, c := startAPI(t, tc.bound)
			ctx := context.Background()
			s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "v"})
			if err != nil {
				t.Fatal(err)
			}
			dir, err := os.MkdirTemp("", "kpv")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			runs, pre := filepath.Join(dir, "repr-runs"), ""
			if tc.ignore {
				pre = "  signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
			}
			req := pool.Request{Owner: "v", Code: fmt.Sprintf("import signal\nclass A:\n def __repr__(self):\n%s"+
				"  open(%q, 'w').close()\n  while True: pass\na = A()", pre, runs)}
			args := []string{"vars", "--socket", socket}
			switch tc.args {
			case "session":
				req.Owner, req.Session = "", s.ID
				args = append(args, "--session", s.ID)
			case "owner":
				args = append(args, "--owner", "v")
			}
			res, err := c.Execute(ctx, req)
			if err != nil || res.Status != pool.StatusSuccess {
				t.Fatalf("execute: %+v, %v", res, err)
			}
			if tc.args == "id" {
				args = append(args, res.Kernel.ID)
			}
			if tc.json {
				args = append(args, "--json")
			}
			cmd := exec.Command(binPath, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the listing's repr to run", func() bool { _, err := os.Stat(runs); return err == nil })
			switch tc.stop {
			case "interrupt":
				err = c.Interrupt(ctx, res.Kernel.ID)
			case "ctrl-c":
				err = cmd.Process.Signal(os.Interrupt)
			}
			if err != nil {
				t.Fatalf("%s during the listing: %v", tc.stop, err)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitKilled || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 {
				t.Fatalf("vars %q: %v, stdout %q, stderr %q; want exit 3 and one line on stderr", args, err, out.String(), errb.String())
			}
			line := strings.TrimSuffix(errb.String(), "\n")
			if tc.json {
				var rep errorReport
				if err := json.Unmarshal(errb.Bytes(), &rep); err != nil || rep.ExitCode != exitKilled || (tc.stop == "interrupt") != (rep.Code == api.CodeInterrupted) {
					t.Fatalf("vars --json: %q (%v), want exit_code 3 (code interrupted after an interrupt)", errb.String(), err)
				}
				line = rep.Error
			}
			if !strings.HasPrefix(line, "kernpool vars: "+tc.wantLines[0]) || !strings.Contains(line, tc.wantLines[len(tc.wantLines)-1]) {
				t.Fatalf("vars stderr %q, want %q", line, tc.wantLines)
			}
		})
	}
}

// A repr that ends its kernel (os._exit) makes `kernpool vars` exit 3
// with one line saying so and the daemon's message (its exit code), or
// one JSON object with the code kernel_died under --json.
func TestVarsKernelDiedExits3(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json %v", asJSON), func(t *testing.T) {
			socket, c := startAPI(t, testenv.Patience)
			res, err := c.Execute(context.Background(), pool.Request{Owner: "v", Code: "import os\nclass A:\n def __repr__(self):\n  os._exit(3)\na = A()"})
			if err != nil || res.Status != pool.StatusSuccess {
				t.Fatalf("execute: %+v, %v", res, err)
			}
			args := []string{"vars", "--socket", socket, "--owner", "v"}
			if asJSON {
				args = append(args, "--json")
			}
			cmd := exec.Command(binPath, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err = cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitKilled || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 {
				t.Fatalf("vars %q: %v, stdout %q, stderr %q; want exit 3 and one line on stderr", args, err, out.String(), errb.String())
			}
			line := strings.TrimSuffix(errb.String(), "\n")
			if asJSON {
				var rep errorReport
				if err := json.Unmarshal(errb.Bytes(), &rep); err != nil || rep.ExitCode != exitKilled || rep.Code != api.CodeKernelDied {
					t.Fatalf("vars --json: %q (%v), want exit_code 3 and code kernel_died", errb.String(), err)
				}
				line = rep.Error
			}
			if !strings.HasPrefix(line, "kernpool vars: a __repr__ ended the kernel during the listing; its state is lost: ") ||
				!strings.Contains(line, "the kernel exited with code 3") {
				t.Fatalf("vars stderr %q, want the kernel's death and its exit code", line)
			}
		})
	}
}

// startAPI serves a pool in this process (kernels as plain processes) on
// a fresh socket, its variables listings bounded by bound, and returns
// the socket and a client.
func startAPI(t *testing.T, bound time.Duration) (string, *api.Client) {
	t.Helper()
	testenv.RequirePython(t)
	dir, err := os.MkdirTemp("", "kpa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p, err := pool.New(pool.Config{StateDir: dir, DefaultInterpreter: testenv.Python})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "kp.sock")
	ln, err := api.Listen(socket, nil)
	if err != nil {
		_ = p.Close(context.Background())
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.NewServer(p, api.ServerConfig{Version: "test", VariablesTimeout: bound}), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	c := api.NewClient(socket)
	t.Cleanup(func() {
		c.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("pool.Close: %v", err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("HTTP shutdown: %v", err)
		}
		<-served
	})
	return socket, c
}
