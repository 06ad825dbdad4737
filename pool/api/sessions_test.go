//go:build unix

package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// TestSessionsOverTheClient: every session method of the Go client
// against a real daemon, with the tool-set rule's 409 and a cell's env.
func TestSessionsOverTheClient(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx, c := testCtx(t), d.client
	s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "alice", Tools: []string{"search"}, Env: map[string]string{"SESSION_NOTE": "hello"}})
	if err != nil || s.Owner != "alice" || len(s.EnvNames) != 1 || s.KernelID != "" {
		t.Fatalf("CreateSession = %+v, %v", s, err)
	}
	if _, err := c.SessionVariables(ctx, s.ID); !errors.Is(err, pool.ErrIdle) {
		t.Fatalf("variables before the first cell: %v, want idle", err)
	}
	res, err := c.Execute(ctx, pool.Request{Session: s.ID, Env: map[string]string{"CELL_NOTE": "only-this-cell"}, Code: "import os\nx = 41\nprint(os.environ['SESSION_NOTE'], os.environ['CELL_NOTE'] == 'only-this-cell')"})
	if err != nil || res.Output != "hello True\n" {
		t.Fatalf("execute in the session: %+v, %v", res, err)
	}
	_, err = c.Execute(ctx, pool.Request{Session: s.ID, Tools: []string{"fetch"}, Code: "x"})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 409 || ae.Code != api.CodeSessionMismatch || !errors.Is(err, pool.ErrSessionMismatch) || !strings.Contains(ae.Message, "tool set") {
		t.Fatalf("another tool set: %v, want 409 session_mismatch", err)
	}
	got, err := c.Session(ctx, s.ID)
	if err != nil || got.KernelID != res.Kernel.ID {
		t.Fatalf("Session = %+v, %v", got, err)
	}
	if list, err := c.Sessions(ctx, "alice"); err != nil || len(list) != 1 || list[0].ID != s.ID {
		t.Fatalf("Sessions(alice) = %+v, %v", list, err)
	}
	if list, err := c.Sessions(ctx, "bob"); err != nil || len(list) != 0 {
		t.Fatalf("Sessions(bob) = %+v, %v", list, err)
	}
	v, err := c.SessionVariables(ctx, s.ID)
	if err != nil || len(v.Variables) != 2 || v.Variables[1].Name != "x" {
		t.Fatalf("SessionVariables = %+v, %v", v, err)
	}
	if err := c.InterruptSession(ctx, s.ID); !errors.Is(err, pool.ErrIdle) {
		t.Fatalf("interrupt with no cell running: %v, want idle", err)
	}
	killed, err := c.RestartSession(ctx, s.ID)
	if err != nil || killed != res.Kernel.ID {
		t.Fatalf("RestartSession = %q, %v", killed, err)
	}
	res, err = c.Execute(ctx, pool.Request{Session: s.ID, Owner: "alice", Code: "print('x' in globals())"})
	if err != nil || res.Output != "False\n" {
		t.Fatalf("after restart: %+v, %v", res, err)
	}
	if _, err := c.Execute(ctx, pool.Request{Session: s.ID, Owner: "bob", Code: "1"}); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("bob naming alice's session: %v, want not_found", err)
	}
	if err := c.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session(ctx, s.ID); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("deleted session: %v", err)
	}
	d.expect(t, "POST", "/v1/sessions", `{"owner":"a","bogus":1}`, 400, api.CodeBadRequest, []string{"bogus"})
	d.expect(t, "POST", "/v1/execute", `{"session":"s0","code":"1"}`, 404, api.CodeNotFound, []string{"no such session"})
}

// TestInterruptSessionRunningCell: POST /v1/sessions/{id}/interrupt ends
// the running cell of the session's kernel, which keeps its state, and
// leaves alone the running cell of the same owner's implicit kernel.
func TestInterruptSessionRunningCell(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx, c := testCtx(t), d.client
	s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	d.exec(t, "carol", "1") // the owner's implicit kernel
	if _, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "x = 7"}); err != nil {
		t.Fatal(err)
	}
	const cell = "import time\nprint('go', flush=True)\ntime.sleep(60)"
	start := func(req pool.Request) (*liveLog, chan *pool.Result) {
		log, done := newLiveLog(), make(chan *pool.Result, 1)
		go func() {
			res, err := c.ExecuteLive(ctx, req, nil, log.add)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		recv(t, "the cell to start", log.first)
		return log, done
	}
	_, implicit := start(pool.Request{Owner: "carol", Code: cell})
	_, inSession := start(pool.Request{Session: s.ID, Code: cell})
	if err := c.InterruptSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	res := recv(t, "the session's interrupted result", inSession)
	if res.Status != pool.StatusInterrupted || !res.Kernel.StatePreserved || res.Exception == nil || res.Exception.EName != "KeyboardInterrupt" {
		t.Fatalf("the session's cell: %+v", res)
	}
	kernels, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kernels {
		if k.Session == "" {
			if _, err := c.Variables(ctx, k.ID); !errors.Is(err, pool.ErrBusy) {
				t.Fatalf("the implicit kernel after the session's interrupt: %v, want still busy", err)
			}
			if err := c.Interrupt(ctx, k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res := recv(t, "the implicit cell's result", implicit); res.Status != pool.StatusInterrupted {
		t.Fatalf("the implicit cell: %+v", res)
	}
	if res, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "print(x)"}); err != nil || res.Output != "7\n" {
		t.Fatalf("the session's state after the interrupt: %+v, %v", res, err)
	}
}

// TestSessionFilesOverTheClient: the files calls addressed by session id
// reach the session's kernel: 409 idle before its first cell (a files call
// starts no kernel), then an upload its next cell reads, a cell's file
// downloaded byte-identical, a listing and a delete; 404 for an unknown
// session, as the other session endpoints answer.
func TestSessionFilesOverTheClient(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	ctx, c := testCtx(t), d.client
	d.exec(t, "alice", "1") // the owner's implicit kernel, not the session's
	s, err := c.CreateSession(ctx, pool.SessionSpec{Owner: "alice", Tools: []string{"search"}})
	if err != nil {
		t.Fatal(err)
	}
	bySession := api.FileTarget{Session: s.ID}
	if _, err := c.UploadFile(ctx, bySession, "early.txt", strings.NewReader("x"), 1); !errors.Is(err, pool.ErrIdle) {
		t.Fatalf("upload before the session's first cell: %v, want idle", err)
	}
	if _, err := c.ListFiles(ctx, bySession, ""); !errors.Is(err, pool.ErrIdle) {
		t.Fatalf("listing before the session's first cell: %v, want idle", err)
	}
	res, err := c.Execute(ctx, pool.Request{Session: s.ID, Code: "import os\nprint(os.path.exists('early.txt'))"})
	if err != nil || res.Output != "False\n" {
		t.Fatalf("first cell: %+v, %v", res, err)
	}
	const data = "a,b\n1,2\n"
	if w, err := c.UploadFile(ctx, bySession, "in/data.csv", strings.NewReader(data), int64(len(data))); err != nil || w.Bytes != int64(len(data)) {
		t.Fatalf("upload by session: %+v, %v", w, err)
	}
	res, err = c.Execute(ctx, pool.Request{Session: s.ID, Code: "t = open('in/data.csv').read()\nprint(repr(t))\n_ = open('out.txt', 'w').write(t.upper())"})
	if err != nil || res.Output != "'a,b\\n1,2\\n'\n" {
		t.Fatalf("the session's next cell read: %+v, %v", res, err)
	}
	var out strings.Builder
	if n, err := c.DownloadFile(ctx, bySession, "out.txt", &out); err != nil || n != int64(len(data)) || out.String() != strings.ToUpper(data) {
		t.Fatalf("download by session: %q (%d), %v", out.String(), n, err)
	}
	if l, err := c.ListFiles(ctx, bySession, "in"); err != nil || len(l.Entries) != 1 || l.Entries[0].Name != "data.csv" {
		t.Fatalf("listing by session: %+v, %v", l, err)
	}
	if _, err := c.DownloadFile(ctx, api.FileTarget{Owner: "alice", Mode: "default"}, "out.txt", &strings.Builder{}); err == nil {
		t.Fatal("the owner's implicit kernel has the session's file")
	}
	if err := c.DeleteFile(ctx, bySession, "in/data.csv"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DownloadFile(ctx, bySession, "in/data.csv", &strings.Builder{}); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("download after delete: %v, want not_found", err)
	}
	d.expect(t, "GET", "/v1/sessions/s0/files", "", 404, api.CodeNotFound, []string{"no such session"})
	d.expect(t, "PUT", "/v1/sessions/s0/files/x", "x", 404, api.CodeNotFound, []string{"no such session"})
}
