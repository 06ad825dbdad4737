package audit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
)

func cell(i int) *pool.CellEvent {
	return &pool.CellEvent{
		Time: time.Unix(1700000000, 0), Owner: "alice", KernelID: "k1", UID: 60001, Mode: "default",
		Code: fmt.Sprintf("print(%d)", i), Status: pool.StatusSuccess, Duration: 1500 * time.Millisecond,
		ToolCalls: map[string]int{"search": 2}, OutputBytes: 2, Redactions: 1,
	}
}

func readLines(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

func TestLineFieldsAndCode(t *testing.T) {
	for _, withCode := range []bool{false, true} {
		path := filepath.Join(testTempDir(t), "audit.log")
		l, err := Open(Config{Path: path, IncludeCode: withCode})
		if err != nil {
			t.Fatal(err)
		}
		l.CellDone(cell(7))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		recs := readLines(t, path)
		sum := sha256.Sum256([]byte("print(7)"))
		r := recs[0]
		if len(recs) != 1 || r.CodeSHA256 != hex.EncodeToString(sum[:]) || r.CodeBytes != 8 || r.Owner != "alice" ||
			r.UID != 60001 || r.Duration != "1.5s" || r.ToolCalls["search"] != 2 || r.Redactions != 1 {
			t.Fatalf("record %+v", recs)
		}
		if (r.Code != nil) != withCode || withCode && *r.Code != "print(7)" {
			t.Fatalf("audit_code %t: code %v", withCode, r.Code)
		}
		// Windows has no Unix modes (Go reports 0666 for a writable file).
		if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", fi.Mode())
		}
	}
}

func TestRotation(t *testing.T) {
	path := filepath.Join(testTempDir(t), "audit.log")
	one, _ := json.Marshal(NewRecord(cell(0), false))
	// Room for three lines per file; keep two rotated files.
	l, err := Open(Config{Path: path, MaxSize: int64(3*(len(one)+1) + 2), Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		l.CellDone(cell(i % 10))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	counts := []int{len(readLines(t, path)), len(readLines(t, path+".1")), len(readLines(t, path+".2"))}
	if counts[0] != 1 || counts[1] != 3 || counts[2] != 3 {
		t.Fatalf("lines per file %v, want [1 3 3] (10 lines, 3 per file, the oldest 3 dropped)", counts)
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("a third rotated file exists: %v", err)
	}
}

func TestRotationFailureKeepsLines(t *testing.T) {
	path := filepath.Join(testTempDir(t), "audit.log")
	var failures atomic.Int64
	logs := &strings.Builder{}
	l, err := Open(Config{Path: path, MaxSize: 1, Keep: 1, OnFailure: func() { failures.Add(1) }, Logger: newTestLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	// Rotation renames onto a non-empty directory, which fails: the lines
	// stay in the current file, and the failure is logged once.
	if err := os.Mkdir(path+".1", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path+".1", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		l.CellDone(cell(i))
	}
	_ = l.Close()
	if n, lines := failures.Load(), len(readLines(t, path)); n != 0 || lines != 4 {
		t.Fatalf("%d failures, %d lines; want 0 and 4", n, lines)
	}
	if n := strings.Count(logs.String(), "audit log rotation failed"); n != 1 {
		t.Fatalf("rotation failure logged %d times, want once:\n%s", n, logs)
	}
}

func TestWriteFailureIsCountedAndLoggedOnce(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0) // every write: ENOSPC
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	var failures atomic.Int64
	logs := &strings.Builder{}
	cfg := Config{Path: "/dev/full", MaxSize: 1 << 20, Keep: 1, OnFailure: func() { failures.Add(1) }, Logger: newTestLogger(logs)}
	l := start(cfg, &rotator{path: cfg.Path, maxSize: cfg.MaxSize, keep: cfg.Keep, f: f})
	for i := range 3 {
		l.CellDone(cell(i)) // never blocks, even while every write fails
	}
	_ = l.Close()
	if n := failures.Load(); n != 3 {
		t.Fatalf("%d failures counted, want 3", n)
	}
	if n := strings.Count(logs.String(), "audit log write failed"); n != 1 {
		t.Fatalf("write failure logged %d times, want once:\n%s", n, logs)
	}
}

// TestOpenMissingDirSaysSo: an audit_log in a directory that does not
// exist fails with one "open" (the path error's own) and names the
// directory to create.
func TestOpenMissingDirSaysSo(t *testing.T) {
	dir := filepath.Join(testTempDir(t), "absent")
	_, err := Open(Config{Path: filepath.Join(dir, "audit.log")})
	if err == nil || !errors.Is(err, fs.ErrNotExist) || strings.Count(err.Error(), "open") != 1 ||
		!strings.HasPrefix(err.Error(), "audit_log: the directory "+dir+" does not exist") {
		t.Fatalf("Open in a missing dir: %v", err)
	}
}
