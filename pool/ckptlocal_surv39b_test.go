package pool

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// localName is a valid checkpoint name (an owner's hash, a key's hash).
var localName = strings.Repeat("a", 32) + "/" + strings.Repeat("b", 64)

// A Put copies its body through a temporary file of the owner's dir,
// made again when a sweep removed the empty dir under it, up to 4 tries
// in all (the first one and 3 more); a dir removed before each of 4
// tries fails the Put.
func TestLocalStorePutRetriesAfterASweep(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sweeps, tries int
		ok            bool
	}{
		{"no owner dir yet", 0, 2, true}, // the first try finds none
		{"swept before 3 tries", 3, 4, true},
		{"swept before 4 tries", 4, 4, false},
		{"swept before 100 tries", 100, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newLocalStore(testTempDir(t))
			if err != nil {
				t.Fatal(err)
			}
			tries := 0
			l.createTemp = func(dir, pattern string) (*os.File, error) {
				tries++
				if tries <= tc.sweeps {
					_ = os.Remove(dir) // missing before the first try
				}
				return os.CreateTemp(dir, pattern)
			}
			err = l.Put(t.Context(), localName, 1, strings.NewReader("state"), 5)
			if (err == nil) != tc.ok || tries != tc.tries {
				t.Fatalf("Put: %v after %d tries, want %d tries and success %v", err, tries, tc.tries, tc.ok)
			}
			if !tc.ok && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Put: %v, want the missing dir's error", err)
			}
		})
	}
}

// lastReadFails gives its bytes with an error in the same Read (a
// connection reset as the body ends).
type lastReadFails struct{ data []byte }

func (r *lastReadFails) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, errors.New("connection reset")
}

// A Put whose body is shorter than announced, or whose reading failed,
// stores nothing.
func TestLocalStorePutRefusesABrokenBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		body io.Reader
		want string
	}{
		{"5 bytes of 10", bytes.NewReader([]byte("state")), "body of 5 bytes, 10 announced"},
		{"a read error with the last bytes", &lastReadFails{make([]byte, 10)}, "connection reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newLocalStore(testTempDir(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Put(t.Context(), localName, 1, tc.body, 10); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Put: %v, want an error naming %q", err, tc.want)
			}
			if _, _, err := l.Get(t.Context(), localName); !errors.Is(err, ErrCheckpointNotFound) {
				t.Fatalf("Get after a failed Put: %v, want ErrCheckpointNotFound", err)
			}
		})
	}
}

// List gives a name's newest generation by number (10 after 9, though
// "10" sorts first) when an older one stayed behind, and of two files of
// one generation the one Get opens (the canonical spelling, not a
// leading zero's).
func TestLocalStoreListNewestGeneration(t *testing.T) {
	l, err := newLocalStore(testTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	owner, hash, _ := strings.Cut(localName, "/")
	if err := os.Mkdir(filepath.Join(l.dir, owner), 0o700); err != nil {
		t.Fatal(err)
	}
	for file, size := range map[string]int{hash + ".9.ckpt": 9, hash + ".10.ckpt": 10, hash + ".010.ckpt": 3} {
		if err := os.WriteFile(filepath.Join(l.dir, owner, file), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	list, err := l.List(t.Context(), "")
	if err != nil || len(list) != 1 || list[0].Generation != 10 || list[0].Size != 10 {
		t.Fatalf("List: %+v, %v; want generation 10 of 10 bytes", list, err)
	}
	obj, e, err := l.Get(t.Context(), localName)
	if err != nil {
		t.Fatal(err)
	}
	_ = obj.Close()
	if e.Generation != 10 || e.Size != 10 {
		t.Fatalf("Get: %+v, want generation 10 of 10 bytes", e)
	}
}
