package pool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The local store lists at most its bound of names (MaxCheckpointList,
// lowered here to 3): exactly the bound is listed whole, one name more,
// in any owner's dir, is ErrCheckpointListLong. An older generation left
// behind (a crash between a Put's rename and its removal) is not a name
// more.
func TestLocalStoreListBound(t *testing.T) {
	const bound = 3
	for _, tc := range []struct {
		name  string
		files []string // owner letter, key letter, generation
		want  int      // names listed; -1: ErrCheckpointListLong
		last  uint64   // the last name's listed generation
	}{
		{"at the bound", []string{"a.1.1", "a.2.1", "a.3.1"}, 3, 1},
		{"one past the bound", []string{"a.1.1", "a.2.1", "a.3.1", "a.4.1"}, -1, 0},
		{"one past over two owners", []string{"a.1.1", "a.2.1", "b.1.1", "b.2.1"}, -1, 0},
		{"at the bound with an older generation left", []string{"a.1.1", "a.2.1", "a.3.1", "a.3.2"}, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newLocalStore(testTempDir(t))
			if err != nil {
				t.Fatal(err)
			}
			l.maxList = bound
			for _, f := range tc.files {
				owner, key, gen := strings.Repeat(f[:1], 32), strings.Repeat(f[2:3], 64), f[4:]
				if err := os.MkdirAll(filepath.Join(l.dir, owner), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(l.dir, owner, key+"."+gen+".ckpt"), []byte(gen), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			list, err := l.List(t.Context(), "")
			if tc.want < 0 {
				if !errors.Is(err, ErrCheckpointListLong) {
					t.Fatalf("List of %d files: %d names, %v; want ErrCheckpointListLong", len(tc.files), len(list), err)
				}
				return
			}
			if err != nil || len(list) != tc.want || list[len(list)-1].Generation != tc.last {
				t.Fatalf("List: %+v, %v; want %d names, the last one's generation %d", list, err, tc.want, tc.last)
			}
		})
	}
}
