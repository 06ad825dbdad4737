package pool

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The room a save gets is the owner's cap less the trailer and less the
// owner's other checkpoints (what is on disk for them), never the key's
// own older one nor another owner's.
func TestCkptRoomLessTheOwnersOtherCheckpoints(t *testing.T) {
	const capBytes, trailer = 1000, 12 // trailer: 4-byte length and 8-byte magic
	c := newStore(t, capBytes)
	a1, a2, b1 := capKeys()
	if note := storeBlob(t, c, a1, 600); note != "" {
		t.Fatal(note)
	}
	fi, err := os.Stat(c.localPath(a1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		k    key
		want int64
	}{
		{"the key itself", a1, capBytes - trailer},
		{"another owner", b1, capBytes - trailer},
		{"another key of the owner", a2, capBytes - trailer - fi.Size()},
	} {
		if got := c.room(tc.k); got != tc.want {
			t.Errorf("%s: room %d, want %d (a1's file holds %d bytes)", tc.name, got, tc.want, fi.Size())
		}
	}
}

// room warns that the store was not listed when, and only when, listing
// it failed.
func TestCkptRoomWarnsWhenListFails(t *testing.T) {
	var logs bytes.Buffer
	c, err := openCkptStore(testTempDir(t), CheckpointConfig{MaxBytesPerOwner: 1000, Retention: time.Hour},
		hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
	if err != nil {
		t.Fatal(err)
	}
	k := key{owner: "a", mode: "default", interpreter: "/py"}
	c.room(k)
	if logs.Len() != 0 {
		t.Fatalf("a listed store logged %q", logs.String())
	}
	c.st = unlistable{c.st}
	c.room(k)
	if !strings.Contains(logs.String(), "checkpoint store not listed") || !strings.Contains(logs.String(), "list refused") {
		t.Fatalf("an unlisted store logged %q, want the warning with its error", logs.String())
	}
}

// A save's spool file is made again when a sweep removed the owner's
// empty dir under it, up to 4 tries in all; a dir removed before each of
// 4 tries fails the save.
func TestCkptCreateRetriesAfterASweep(t *testing.T) {
	for _, tc := range []struct {
		name            string
		sweeps, tries   int
		wantErr, wantOK bool
	}{
		{"swept once", 1, 2, false, true},
		{"swept before 3 tries", 3, 4, false, true},
		{"swept before 4 tries", 4, 4, true, false},
		{"swept before 100 tries", 100, 4, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newStore(t, 1000)
			tries := 0
			c.createTemp = func(dir, pattern string) (*os.File, error) {
				tries++
				if tries <= tc.sweeps {
					if err := os.Remove(dir); err != nil {
						t.Fatal(err)
					}
				}
				return os.CreateTemp(dir, pattern)
			}
			f, err := c.create(key{owner: "a", mode: "default", interpreter: "/py"})
			if f != nil {
				c.discard(f)
			}
			if (err != nil) != tc.wantErr || (f != nil) != tc.wantOK || tries != tc.tries {
				t.Fatalf("create: %v after %d tries, want %d tries and an error %v", err, tries, tc.tries, tc.wantErr)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("create: %v, want the missing dir's error", err)
			}
		})
	}
}

// storeFixed is storeBlob with a header of fixed length (a fixed time,
// the key's session): two keys whose fields are as long make files of
// one size.
func storeFixed(t *testing.T, c *ckptStore, k key, n int) string {
	t.Helper()
	return storeBlobAt(t, c, k, n, time.Unix(1_700_000_000, 0).UTC(), k.session)
}

// Two sessions of one owner with every other part of the key equal keep
// two checkpoints: the second counts the first against the owner's cap
// instead of replacing it, and the refusal gives the figures.
func TestCkptSessionsOfOneOwnerKeepTwoCheckpoints(t *testing.T) {
	c := newStore(t, 1000)
	s1 := key{owner: "a", mode: "default", interpreter: "/py", session: "s1"}
	s2 := s1
	s2.session = "s2"
	if note := storeFixed(t, c, s1, 600); note != "" {
		t.Fatal(note)
	}
	fi, err := os.Stat(c.localPath(s1, 1))
	if err != nil {
		t.Fatalf("the first session's checkpoint: %v", err)
	}
	n := fi.Size() // s2's file is as long: its header differs in one digit
	want := fmt.Sprintf("the checkpoint (%d bytes) would take the owner's checkpoints to %d bytes, over the 1000-byte cap", n, 2*n)
	if note := storeFixed(t, c, s2, 600); !strings.Contains(note, want) {
		t.Fatalf("a second session's 600 bytes next to the first's: note %q, want %q", note, want)
	}
	if c.name(s1) == c.name(key{owner: "a", mode: "default", interpreter: "/py"}) {
		t.Fatal("a session's checkpoint is named as the owner's implicit kernel's")
	}
}

// A checkpoint that takes the owner's cap exactly is stored; one byte
// over it is refused.
func TestCkptCapIsInclusive(t *testing.T) {
	k := key{owner: "a", mode: "default", interpreter: "/py"}
	probe := newStore(t, 1<<20)
	if note := storeFixed(t, probe, k, 500); note != "" {
		t.Fatal(note)
	}
	fi, err := os.Stat(probe.localPath(k, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		capBytes int64
		ok       bool
	}{{fi.Size(), true}, {fi.Size() - 1, false}} {
		if note := storeFixed(t, newStore(t, tc.capBytes), k, 500); (note == "") != tc.ok {
			t.Errorf("a %d-byte checkpoint under a %d-byte cap: note %q, want stored %v", fi.Size(), tc.capBytes, note, tc.ok)
		}
	}
}

// The pool writes a header of up to 1 MiB, as it reads one, and loads an
// object of up to the cap plus the largest header and the trailer.
func TestCkptHeaderAndObjectBoundsInclusive(t *testing.T) {
	base, err := json.Marshal(&ckptHeader{Owner: "o", Cwd: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hdrLen int
		ok     bool
	}{{1 << 20, true}, {1<<20 + 1, false}} {
		h := &ckptHeader{Owner: "o", Cwd: strings.Repeat("c", 1+tc.hdrLen-len(base))}
		var buf bytes.Buffer
		err := writeTrailer(&buf, h)
		if tc.ok {
			var got *ckptHeader
			if err == nil {
				got, err = readHeader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			}
			if err != nil || got.Cwd != h.Cwd {
				t.Errorf("header of %d bytes: %v", tc.hdrLen, err)
			}
		} else if err == nil {
			t.Errorf("header of %d bytes written", tc.hdrLen)
		}
	}
	const capBytes = 100
	c := newStore(t, capBytes)
	for _, tc := range []struct {
		blob int
		ok   bool
	}{{capBytes, true}, {capBytes + 1, false}} {
		b := ckptBlob(t, strings.Repeat("s", tc.blob), 1<<20)
		h, err := c.header(nopObject{bytes.NewReader(b)}, CheckpointEntry{Name: "x", Size: int64(len(b))})
		if (err == nil) != tc.ok || tc.ok && h.Size != int64(tc.blob) {
			t.Errorf("object of a %d-byte blob and a 1 MiB header: %+v, %v; want ok %v", tc.blob, h, err, tc.ok)
		}
	}
}

type nopObject struct{ *bytes.Reader }

func (nopObject) Close() error { return nil }

// trailer is a checkpoint trailer claiming a header of n bytes.
func trailer(n uint32) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), ckptMagic...)
}

// A file shorter than a trailer is no checkpoint; a trailer alone
// claims an empty header, which is malformed; a trailer claiming more
// header than the file holds before it is malformed itself.
func TestCkptReadHeaderRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"11 bytes", trailer(0)[1:], "not a checkpoint file"},
		{"a trailer alone", trailer(0), "malformed checkpoint header"},
		{"a header of 8 bytes claimed as 9", append([]byte(`{"a":1} `), trailer(9)...), "malformed checkpoint trailer"},
		{"a header of 8 bytes claimed as 20", append([]byte(`{"a":1} `), trailer(20)...), "malformed checkpoint trailer"},
	} {
		if _, err := readHeader(bytes.NewReader(tc.b), int64(len(tc.b))); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// deleteFails is a store whose Delete fails.
type deleteFails struct{ CheckpointStore }

func (deleteFails) Delete(context.Context, string, uint64) error { return errors.New("delete refused") }

// Removing a key's checkpoints, or an owner's, warns only about what it
// could not remove, and an owner's removal counts what went: the other
// owner's checkpoints stay.
func TestCkptRemoveCountsAndWarns(t *testing.T) {
	var logs bytes.Buffer
	c, err := openCkptStore(testTempDir(t), CheckpointConfig{MaxBytesPerOwner: 1 << 20, Retention: time.Hour},
		hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
	if err != nil {
		t.Fatal(err)
	}
	a1 := key{owner: "a", mode: "default", interpreter: "/py"}
	a2, a3, b1 := a1, a1, a1
	a2.cwd, a3.cwd, b1.owner = "/w", "/x", "b"
	for _, k := range []key{a1, a2, a3, b1} {
		if note := storeFixed(t, c, k, 10); note != "" {
			t.Fatal(note)
		}
	}
	c.remove(a1, deleteAll)
	if n := c.removeOwner("a"); n != 2 || logs.Len() != 0 {
		t.Fatalf("removeOwner(a) after a1 went: %d, logs %q; want 2 (a2, a3), no warning", n, logs.String())
	}
	for k, want := range map[key]bool{a1: false, a2: false, a3: false, b1: true} {
		if _, err := os.Stat(c.localPath(k, 1)); (err == nil) != want {
			t.Errorf("%+v: stat %v, want it kept %v", k, err, want)
		}
	}
	c.st = deleteFails{c.st}
	c.remove(b1, deleteAll)
	if !strings.Contains(logs.String(), "checkpoint not removed") {
		t.Fatalf("a failed remove logged %q", logs.String())
	}
	if n := c.removeOwner("b"); n != 0 || !strings.Contains(logs.String(), "owner checkpoint not removed") {
		t.Fatalf("removeOwner(b) with Delete failing: %d, logs %q; want 0 and a warning", n, logs.String())
	}
}

// The sweep removes a checkpoint stored more than the retention ago, not
// one stored exactly that long ago.
func TestCkptSweepKeepsOneExactlyRetentionOld(t *testing.T) {
	c := newStore(t, 1<<20) // retention: an hour
	k := key{owner: "a", mode: "default", interpreter: "/py"}
	if note := storeFixed(t, c, k, 10); note != "" {
		t.Fatal(note)
	}
	list, err := c.st.List(context.Background(), "")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	stored := list[0].Modified
	if n := c.sweep(stored.Add(time.Hour)); n != 0 {
		t.Fatalf("an hour after: %d removed, want 0", n)
	}
	if n := c.sweep(stored.Add(time.Hour + time.Nanosecond)); n != 1 {
		t.Fatalf("an hour and 1ns after: %d removed, want 1", n)
	}
}

// Listing the checkpoints gives each one's tools (an empty list for
// none) and warns when the store cannot be listed, and only then.
func TestCkptListWarnsOnlyWhenUnlisted(t *testing.T) {
	var logs bytes.Buffer
	c, err := openCkptStore(testTempDir(t), CheckpointConfig{MaxBytesPerOwner: 1 << 20, Retention: time.Hour},
		hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn}))
	if err != nil {
		t.Fatal(err)
	}
	k := key{owner: "a", mode: "default", interpreter: "/py"}
	kt := k
	kt.cwd, kt.tools = "/w", "s,t"
	for _, k := range []key{k, kt} {
		if note := storeFixed(t, c, k, 10); note != "" {
			t.Fatal(note)
		}
	}
	infos := c.list()
	if len(infos) != 2 || logs.Len() != 0 {
		t.Fatalf("list: %+v, logs %q; want a's 2 checkpoints, no warning", infos, logs.String())
	}
	if infos[0].Tools == nil || len(infos[0].Tools) != 0 || !slices.Equal(infos[1].Tools, []string{"s", "t"}) {
		t.Fatalf("tools %q and %q, want none (an empty list) and [s t]", infos[0].Tools, infos[1].Tools)
	}
	c.st = unlistable{c.st}
	if infos := c.list(); len(infos) != 0 || !strings.Contains(logs.String(), "checkpoint store not listed") {
		t.Fatalf("list of an unlistable store: %+v, logs %q; want none and the warning", infos, logs.String())
	}
}
