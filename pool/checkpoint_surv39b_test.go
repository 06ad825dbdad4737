package pool

import (
	"bytes"
	"context"
	"errors"
	"os"
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
	a1 := key{owner: "a", mode: "default", interpreter: "/py"}
	a2 := a1
	a2.cwd = "/w"
	b1 := a1
	b1.owner = "b"
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

// listFails is a store whose List fails (an unreachable remote store).
type listFails struct{ CheckpointStore }

func (listFails) List(context.Context, string) ([]CheckpointEntry, error) {
	return nil, errors.New("store unreachable")
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
	c.st = listFails{c.st}
	c.room(k)
	if !strings.Contains(logs.String(), "checkpoint store not listed") || !strings.Contains(logs.String(), "store unreachable") {
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

// Two sessions of one owner with every other part of the key equal keep
// two checkpoints: the second counts the first against the owner's cap
// instead of replacing it.
func TestCkptSessionsOfOneOwnerKeepTwoCheckpoints(t *testing.T) {
	c := newStore(t, 1000)
	s1 := key{owner: "a", mode: "default", interpreter: "/py", session: "s1"}
	s2 := s1
	s2.session = "s2"
	if note := storeBlob(t, c, s1, 600); note != "" {
		t.Fatal(note)
	}
	if note := storeBlob(t, c, s2, 600); !strings.Contains(note, "over the 1000-byte cap") {
		t.Fatalf("a second session's 600 bytes next to the first's: note %q, want the cap's refusal", note)
	}
	if _, err := os.Stat(c.localPath(s1, 1)); err != nil {
		t.Fatalf("the first session's checkpoint: %v", err)
	}
	if c.name(s1) == c.name(key{owner: "a", mode: "default", interpreter: "/py"}) {
		t.Fatal("a session's checkpoint is named as the owner's implicit kernel's")
	}
}
