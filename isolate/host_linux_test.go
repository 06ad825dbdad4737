package isolate

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// A uid range must not hold a user or group: the check sees entries at
// both ends of the range and a line with only the three fields it reads,
// skips those just outside, short lines, ids that are not numbers and a
// missing file.
func TestRangeEntriesFindsUsersAtTheEdges(t *testing.T) {
	dir := t.TempDir()
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	write := func(path string, lines ...string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(passwd,
		"root:x:0:0:root:/root:/bin/bash",
		"below:x:61899:61899::/:/bin/false",
		"first:x:61900:61900::/:/bin/false",
		"short:x",
		"three:x:61905",
		"word:x:sixty:1::/:/bin/false",
		"last:x:61909:61909::/:/bin/false",
		"above:x:61910:61910::/:/bin/false")
	write(group, "grp:x:61901:", "other:x:61911:")
	got := rangeEntries([]string{passwd, filepath.Join(dir, "absent"), group}, 61900, 61909)
	want := []string{
		passwd + " first (61900)",
		passwd + " three (61905)",
		passwd + " last (61909)",
		group + " grp (61901)",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("entries in 61900-61909:\n got %q\nwant %q", got, want)
	}
}

// killUID ends every process of the uid it is given, and only those.
func TestKillUIDEndsOnlyThatUIDsProcesses(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, other = 61979, 61978
	p1, done1 := uidProc(t, uid)
	p2, done2 := uidProc(t, uid)
	theirs, _ := uidProc(t, other)
	// A process can still show as running between its SIGKILL and its
	// exit, and get a second one: at least its two, then.
	if n := killUID(uid); n < 2 {
		t.Errorf("killUID killed %d processes, want at least 2", n)
	}
	// SIGKILL marks its targets before kill(2) returns: a process
	// killUID missed is told at once, not after a wait for its exit.
	for _, p := range []*exec.Cmd{p1, p2} {
		if !testenv.Doomed(p.Process.Pid) {
			t.Fatalf("process %d of uid %d was not killed by killUID", p.Process.Pid, uid)
		}
	}
	for i, done := range []chan error{done1, done2} {
		pid := []*exec.Cmd{p1, p2}[i].Process.Pid
		var err error
		select {
		case err = <-done:
		case <-time.After(testenv.Patience):
			t.Fatalf("process %d of uid %d still runs after killUID", pid, uid)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("process %d of uid %d: %v, want killed by SIGKILL", pid, uid, err)
		}
	}
	if _, ok := procUID(theirs.Process.Pid); !ok {
		t.Errorf("the process of uid %d was ended too", other)
	}
}

// canUse reads a directory's owner bits for its owner, its group bits for
// a member of its group and its other bits for anyone else: a kernel uid
// (its own group, not the owner) may enter a directory whose group or
// other bits alone let it, and not one whose group bits deny it while the
// other bits would allow it.
func TestCanUseReadsTheBitsOfTheCallersClass(t *testing.T) {
	testenv.RequireRoot(t)
	const uid, gid, otherGID = 61963, 61963, 61964
	base := stateDir(t) // searchable by others up to /
	cases := []struct {
		name       string
		owner, gid int
		mode       os.FileMode
		searchable bool
	}{
		{"its group may search", 0, gid, 0o710, true},
		{"only others may search, and it is an other", 0, otherGID, 0o701, true},
		{"its group may not search, others may", 0, gid, 0o701, false},
		{"only another group may search", 0, otherGID, 0o710, false},
		{"its owner may not search, its group may", uid, gid, 0o070, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(base, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(d, c.owner, c.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, c.mode); err != nil {
				t.Fatal(err)
			}
			err := canUse(d, uid, gid, true)
			if c.searchable && err != nil {
				t.Errorf("canUse(%s, mode %04o, group %d) = %v; want nil", d, c.mode, c.gid, err)
			}
			if !c.searchable && (!errors.Is(err, ErrAccess) || !strings.Contains(err.Error(), "cannot search "+d)) {
				t.Errorf("canUse(%s, mode %04o, group %d) = %v; want ErrAccess: cannot search it", d, c.mode, c.gid, err)
			}
		})
	}
}
