package kinit

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	cases := []struct {
		name    string
		text    string
		ready   *Ready
		failure string
		exited  bool
		code    int
		signal  int
	}{
		{name: "ready then exit", text: "ready 7 ns=mnt,pid,ipc,uts,net seccomp=1\nexit 3\n",
			ready: &Ready{Pid: 7, Namespaces: []string{"mnt", "pid", "ipc", "uts", "net"}, Seccomp: true}, exited: true, code: 3},
		{name: "killed by a signal", text: "ready 2 ns=mnt seccomp=1\nsignal 9\n",
			ready: &Ready{Pid: 2, Namespaces: []string{"mnt"}, Seccomp: true}, exited: true, code: -1, signal: 9},
		{name: "merging kernel", text: "ready 3 ns=mnt seccomp=1 merge=1\n",
			ready: &Ready{Pid: 3, Namespaces: []string{"mnt"}, Seccomp: true, MemoryMerge: true}},
		{name: "reaper supervises", text: "ready 3 ns=mnt seccomp=1 merge=1 init=reaper\nexit 0\n",
			ready: &Ready{Pid: 3, Namespaces: []string{"mnt"}, Seccomp: true, MemoryMerge: true, Supervisor: SupervisorReaper}, exited: true},
		{name: "no seccomp claimed", text: "ready 2 ns= seccomp=0\n", ready: &Ready{Pid: 2}},
		{name: "setup failed", text: "fail mount tmpfs on /tmp: operation not permitted\n", failure: "mount tmpfs on /tmp: operation not permitted"},
		{name: "init killed before reporting", text: ""},
		{name: "garbage exit line ignored", text: "exit x\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ready, failure, exited, code, signal := ParseStatus(c.text)
			if !reflect.DeepEqual(ready, c.ready) || failure != c.failure || exited != c.exited || code != c.code || signal != c.signal {
				t.Fatalf("ParseStatus(%q) = %+v %q %v %d %d", c.text, ready, failure, exited, code, signal)
			}
		})
	}
}

// The ready line the init writes is what the daemon parses.
func TestReadyLineRoundTrip(t *testing.T) {
	for _, in := range []Ready{
		{Pid: 5, Namespaces: []string{"mnt", "pid", "ipc", "uts"}, Seccomp: true},
		{Pid: 6, Namespaces: []string{"mnt"}, Seccomp: true, MemoryMerge: true},
		{Pid: 7, Namespaces: []string{"mnt"}, Seccomp: true, Supervisor: SupervisorGo},
	} {
		got, _, _, _, _ := ParseStatus(in.line())
		if !reflect.DeepEqual(got, &in) {
			t.Fatalf("round trip: %+v, want %+v", got, in)
		}
	}
}

func TestConfigRoundTripAndDefaults(t *testing.T) {
	in := Config{Path: "/usr/bin/python3", Args: []string{"python3", "r.py"}, UID: 60001, GID: 60001,
		Keep: []string{"/tmp/s"}, Seccomp: [][]byte{{1, 2, 3, 4, 5, 6, 7, 8}}, Peer: 42}
	env, err := in.Env()
	if err != nil {
		t.Fatal(err)
	}
	out, err := decode(strings.TrimPrefix(env[0], EnvConfig+"="), strings.TrimPrefix(env[1], EnvSeccomp+"="))
	if err != nil {
		t.Fatal(err)
	}
	in.TmpSize, in.PtyMax = DefaultTmpSize, DefaultPtyMax // 0 means the default
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("decode(Encode) = %+v, want %+v", out, in)
	}
	if _, err := decode("{", ""); err == nil {
		t.Fatal("decode accepted malformed JSON")
	}
}
