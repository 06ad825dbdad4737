package rpcsock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"

	"github.com/kernpool/kernpool/internal/testenv"
)

func TestFunctionNames(t *testing.T) {
	tools := []string{"0day", "_secret", "a-b", "a.b", "call", "class", "len", "web_search", "ünï"}
	got := FunctionNames(tools)
	want := [][2]string{
		{"tool_0day", "0day"}, {"tool__secret", "_secret"}, {"a_b", "a-b"}, {"a_b_2", "a.b"},
		{"call_", "call"}, {"class_", "class"}, {"len_", "len"}, {"web_search", "web_search"}, {"tool__n_", "ünï"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// TestStubCallsAndErrors drives the generated module against a real server:
// function per tool, call(), dict argument, JSON decoding, _raw, and each
// refusal raised as ToolError with the server's exact text.
func TestStubCallsAndErrors(t *testing.T) {
	testenv.RequirePython(t)
	tools := []string{"web-search", "json", "fail", "len"}
	s := listen(t, Config{Tools: tools})
	h := pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		switch c.Tool {
		case "json":
			return `{"echo": ` + string(c.Args) + `}`, nil
		case "fail":
			return "", fmt.Errorf("backend down")
		}
		return "plain " + string(c.Args), nil
	})
	end := s.BeginCell(h, 6)
	script := `
import kernpool_tools as kt
from kernpool_tools import ToolError
assert kt.FUNCTIONS == {"fail": "fail", "json": "json", "len_": "len", "web_search": "web-search"}, kt.FUNCTIONS
assert kt.TOOLS == ("fail", "json", "len", "web-search"), kt.TOOLS
assert kt.web_search(q="x") == 'plain {"q":"x"}', kt.web_search(q="x")
assert kt.json({"a": [1, 2]}, b=None) == {"echo": {"a": [1, 2], "b": None}}
assert kt.call("json", _raw=True) == '{"echo": {}}'
assert kt.len_() == "plain {}"
def refused(fn, *a, **k):
    try:
        fn(*a, **k)
    except ToolError as e:
        return str(e)
    raise AssertionError("no ToolError")
print(refused(kt.fail))
print(refused(kt.call, "nope"))
kt.call("json")
print(refused(kt.call, "json"))
`
	out, err := runPython(t, s, Stub(tools), script)
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	want := "backend down\n" + UnknownToolMessage("nope", []string{"fail", "json", "len", "web-search"}) + "\n" + LimitMessage(6) + "\n"
	if out != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
	if n := end(); n != 6 {
		t.Fatalf("callsMade = %d, want 6", n)
	}
	out, err = runPython(t, s, Stub(tools), `
try:
    kernpool_tools.call("json")
except kernpool_tools.ToolError as e:
    print(e)
`)
	if err != nil || out != MsgNoActiveCell+"\n" {
		t.Fatalf("no cell: %v %q", err, out)
	}
}

// TestStubSurvivesIdleDropWithoutReplay: the server drops the idle
// connection between two calls; the second call runs on a new connection
// and the handler runs exactly twice.
func TestStubSurvivesIdleDropWithoutReplay(t *testing.T) {
	testenv.RequirePython(t)
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to tell one connection from another")
	}
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			if network == "unix" {
				requireUnixSockets(t)
			}
			s := listen(t, Config{Tools: []string{"t"}, IdleTimeout: 200 * time.Millisecond, Network: network})
			h := &echo{}
			end := s.BeginCell(h, 0)
			defer end()
			// The sockets the process holds after each call (by inode) show
			// whether the second call ran on a new connection.
			out, err := runPython(t, s, Stub([]string{"t"}), `
import os, time
def socks():
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:"):
            found.add(link)
    return found
assert kernpool_tools.t(n=1) == 't:{"n":1}'
first = socks()
time.sleep(0.6)
assert kernpool_tools.t(n=2) == 't:{"n":2}'
second = socks()
print("ok", "dropped" if first and second and not (first & second) else "kept %s %s" % (first, second))
`)
			if err != nil || out != "ok dropped\n" {
				t.Fatalf("python: %v\n%s", err, out)
			}
			if n := h.calls.Load(); n != 2 {
				t.Fatalf("handler calls = %d, want 2", n)
			}
		})
	}
}

// TestStubTimeoutNotRetried: a call that outlives _timeout raises
// ToolTimeout, is never sent again, and the next call uses a fresh
// connection (the late reply cannot be mistaken for its answer).
func TestStubTimeoutNotRetried(t *testing.T) {
	testenv.RequirePython(t)
	s := listen(t, Config{Tools: []string{"slow", "fast"}})
	var slowCalls atomic.Int64
	end := s.BeginCell(pool.ToolHandlerFunc(func(ctx context.Context, c pool.ToolCall) (string, error) {
		if c.Tool == "fast" {
			return "fast", nil
		}
		slowCalls.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return "late", nil
	}), 0)
	out, err := runPython(t, s, Stub([]string{"slow", "fast"}), `
try:
    kernpool_tools.slow(_timeout=0.2)
except kernpool_tools.ToolTimeout as e:
    assert isinstance(e, TimeoutError)
    print("timeout")
print(kernpool_tools.fast())
`)
	if err != nil || out != "timeout\nfast\n" {
		t.Fatalf("python: %v\n%s", err, out)
	}
	end()
	if n := slowCalls.Load(); n != 1 {
		t.Fatalf("slow handler ran %d times, want 1", n)
	}
}

// TestStubConcurrentThreads: threads of a cell get their own answers.
func TestStubConcurrentThreads(t *testing.T) {
	testenv.RequirePython(t)
	s := listen(t, Config{Tools: []string{"t"}})
	end := s.BeginCell(pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		return string(c.Args), nil
	}), 1000)
	out, err := runPython(t, s, Stub([]string{"t"}), `
import threading
bad = []
def work(i):
    for j in range(25):
        r = kernpool_tools.t(i=i, j=j)
        if r != {"i": i, "j": j}:
            bad.append((i, j, r))
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print(len(bad))
`)
	if err != nil || out != "0\n" {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if n := end(); n != 200 {
		t.Fatalf("callsMade = %d, want 200", n)
	}
}

// TestStubEnvFallback: without _kernpool_runtime the stub reads the
// KERNPOOL_RPC_* environment variables (standalone use).
func TestStubEnvFallback(t *testing.T) {
	testenv.RequirePython(t)
	s := listen(t, Config{Tools: []string{"t"}})
	end := s.BeginCell(&echo{}, 0)
	defer end()
	env := []string{"KERNPOOL_RPC_ENDPOINT=" + s.Endpoint(), "KERNPOOL_RPC_TOKEN=" + s.Token()}
	out, err := runPythonAt(t, "", "", env, Stub([]string{"t"}), `print(kernpool_tools.t())`)
	if err != nil || out != "t:{}\n" {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// fakeServer is a scripted peer for the stub's failure paths: answer
// decides what to do with each request line (the conn's index is given).
type fakeServer struct {
	ln    net.Listener
	conns atomic.Int64
	lines atomic.Int64
	wg    sync.WaitGroup
}

func newFakeServer(t *testing.T, answer func(conn int64, c net.Conn)) *fakeServer {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(privateDir(t), SocketName))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := f.conns.Add(1)
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					_ = c.SetReadDeadline(time.Now().Add(testenv.Patience))
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					f.lines.Add(1)
					answer(n, c)
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); f.wg.Wait() })
	return f
}

// TestStubReplayRules: what the stub does when the connection fails after
// its request was sent. Only the idle notice (the server provably did not
// read the request) allows a second send; plain EOF after the request and
// timeouts raise without resending.
func TestStubReplayRules(t *testing.T) {
	testenv.RequirePython(t)
	requireUnixSockets(t)
	tests := []struct {
		name       string
		answer     func(conn int64, c net.Conn)
		wantOut    string
		wantConns  int64
		wantLines  int64
		pythonCall string
	}{
		{"notice then answer", func(n int64, c net.Conn) {
			if n == 1 {
				_, _ = io.WriteString(c, idleNotice)
				_ = c.Close()
				return
			}
			_, _ = c.Write(encodeReply("result", "second"))
		}, "second", 2, 2, "kernpool_tools.t()"},
		{"eof after request", func(_ int64, c net.Conn) { _ = c.Close() },
			"ToolError: tool RPC connection closed before the reply; the call may have run and is not retried", 1, 1, "kernpool_tools.t()"},
		{"notice twice", func(_ int64, c net.Conn) { _, _ = io.WriteString(c, idleNotice); _ = c.Close() },
			"ToolError: tool RPC server closed the connection twice; giving up", 2, 2, "kernpool_tools.t()"},
		{"no answer", func(int64, net.Conn) {},
			"ToolTimeout: tool call timed out; not retried", 1, 1, "kernpool_tools.t(_timeout=0.2)"},
		{"garbage reply", func(_ int64, c net.Conn) { _, _ = c.Write([]byte("[1]\n")) },
			"ToolError: malformed tool RPC reply", 1, 1, "kernpool_tools.t()"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.answer)
			script := fmt.Sprintf(`
try:
    print(%s)
except kernpool_tools.ToolError as e:
    print(type(e).__name__ + ": " + str(e))
`, tc.pythonCall)
			out, err := runPythonAt(t, f.ln.Addr().String(), "tok", nil, Stub([]string{"t"}), script)
			if err != nil || strings.TrimSpace(out) != tc.wantOut {
				t.Fatalf("python: %v\n%s\nwant %s", err, out, tc.wantOut)
			}
			if f.conns.Load() != tc.wantConns || f.lines.Load() != tc.wantLines {
				t.Fatalf("conns=%d lines=%d, want %d and %d", f.conns.Load(), f.lines.Load(), tc.wantConns, tc.wantLines)
			}
		})
	}
}

// TestStubCompilesForOddNames: the generated source parses for tool names
// that are keywords, builtins, non-ASCII or colliding.
func TestStubCompilesForOddNames(t *testing.T) {
	testenv.RequirePython(t)
	tools := []string{"import", "print", "a-b", "a.b", "a_b", "é", "9", "FUNCTIONS", `quote"s`, `back\slash`}
	out, err := runPython(t, nil, Stub(tools), `
fns = kernpool_tools.FUNCTIONS
assert sorted(fns.values()) == sorted(kernpool_tools.TOOLS), fns
for fn in fns:
    assert callable(getattr(kernpool_tools, fn)), fn
assert isinstance(kernpool_tools.FUNCTIONS, dict)
print(len(fns))
`)
	if err != nil || out != fmt.Sprintf("%d\n", len(tools)) {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// TestStubLargePayloads: a multi-MiB reply arrives whole; a request over
// the line cap is refused with the exact error and the next call works.
func TestStubLargePayloads(t *testing.T) {
	testenv.RequirePython(t)
	s := listen(t, Config{Tools: []string{"big", "len"}, MaxLineBytes: 1 << 20})
	end := s.BeginCell(pool.ToolHandlerFunc(func(_ context.Context, c pool.ToolCall) (string, error) {
		if c.Tool == "big" {
			return strings.Repeat("x", 3<<20), nil
		}
		return fmt.Sprint(len(c.Args)), nil
	}), 0)
	out, err := runPython(t, s, Stub([]string{"big", "len"}), `
assert kernpool_tools.big() == "x" * (3 << 20)
print(kernpool_tools.len_(s="y" * 1000))
try:
    kernpool_tools.len_(s="y" * (2 << 20))
except kernpool_tools.ToolError as e:
    print(e)
print(kernpool_tools.len_(s=""))
`)
	if err != nil || out != "1008\nInvalid RPC request: line too long\n8\n" {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if n := end(); n != 3 {
		t.Fatalf("callsMade = %d, want 3", n)
	}
}
