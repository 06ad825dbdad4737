package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kernpool/kernpool/units"
)

// goCache is gen's own build cache (GOCACHE of every go command it runs):
// each mutant build adds its package's and its dependents' objects, which
// nothing ever reuses, and the user's cache grew by tens of GB a session.
// Between mutants, past limit, trim removes the entries added since the
// snapshot taken after the unmutated builds: std, the dependencies and
// the unmutated package stay, so the next build recompiles only what the
// mutant changes (emptying it all would rebuild std and every dependency).
// When even that leaves it past limit, it is emptied.
type goCache struct {
	dir   string
	limit int64           // bytes; 0: never trimmed
	keep  map[string]bool // entries (dir/name) of the snapshot
	lock  *os.File
}

func openCache(dir string, limit int64) (*goCache, error) {
	dir, err := filepath.Abs(dir) // GOCACHE must be absolute
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &goCache{dir: dir, limit: limit}
	// Another gen trimming the same cache would delete this one's
	// objects in the middle of its builds.
	if c.lock, err = lockFile(filepath.Join(dir, "gen.lock")); err != nil {
		return nil, fmt.Errorf("locking %s (another gen uses it?): %w", dir, err)
	}
	// Leftovers of an interrupted run stay in the next snapshot: bound
	// them here.
	if size, err := c.size(); err == nil && limit > 0 && size > limit {
		return c, c.empty()
	}
	return c, nil
}

func (c *goCache) close() error {
	if c == nil {
		return nil
	}
	err := c.prune()
	c.lock.Close()
	return err
}

// entries lists the cache's entries: the files of its two-hex-digit
// subdirectories (go's README and trim stamps are left alone).
func (c *goCache) entries(f func(path string, size int64)) error {
	subs, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	for _, s := range subs {
		if !s.IsDir() || len(s.Name()) != 2 {
			continue
		}
		files, err := os.ReadDir(filepath.Join(c.dir, s.Name()))
		if err != nil {
			return err
		}
		for _, e := range files {
			p := filepath.Join(s.Name(), e.Name())
			size, err := treeSize(filepath.Join(c.dir, p))
			if err != nil {
				return err
			}
			f(p, size)
		}
	}
	return nil
}

// treeSize is the bytes of the file at path, or of the files under it:
// go run's executables are cached as a directory (<hash>-d/gremlins).
func treeSize(path string) (int64, error) {
	var n int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return n, nil // removed meanwhile
	}
	return n, err
}

func (c *goCache) size() (int64, error) {
	var n int64
	err := c.entries(func(_ string, size int64) { n += size })
	return n, err
}

// snapshot records the entries trim keeps: call it after the unmutated
// builds (coverage, baseline, warm).
func (c *goCache) snapshot() error {
	if c == nil {
		return nil
	}
	c.keep = map[string]bool{}
	if err := c.entries(func(p string, _ int64) { c.keep[p] = true }); err != nil {
		return err
	}
	size, err := c.size()
	if err == nil && c.limit > 0 && size > c.limit {
		fmt.Printf("gen: the unmutated builds alone fill %s of the build cache, over -cache-limit %s: "+
			"it is emptied, and std rebuilt, after every mutant; raise the limit\n", mib(size), mib(c.limit))
	}
	return err
}

// trim bounds the cache between mutants (never while a go command runs):
// past the limit it drops what mutants added, and empties it when that is
// not enough.
func (c *goCache) trim() error {
	if c == nil || c.limit <= 0 {
		return nil
	}
	size, err := c.size()
	if err != nil || size <= c.limit {
		return err
	}
	if err := c.prune(); err != nil {
		return err
	}
	if size, err = c.size(); err != nil || size <= c.limit {
		return err
	}
	return c.empty()
}

// prune removes the entries not in the snapshot. go tolerates a missing
// entry (a miss: it rebuilds), and no go command runs meanwhile.
func (c *goCache) prune() error {
	if c.keep == nil {
		return nil
	}
	var gone []string
	if err := c.entries(func(p string, _ int64) {
		if !c.keep[p] {
			gone = append(gone, p)
		}
	}); err != nil {
		return err
	}
	for _, p := range gone {
		if err := os.RemoveAll(filepath.Join(c.dir, p)); err != nil {
			return err
		}
	}
	return nil
}

// empty removes every entry: the next build recompiles std and every
// dependency (a minute or more for pool on two cores).
func (c *goCache) empty() error {
	subs, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	for _, s := range subs {
		if s.IsDir() && len(s.Name()) == 2 {
			if err := os.RemoveAll(filepath.Join(c.dir, s.Name())); err != nil {
				return err
			}
		}
	}
	c.keep = map[string]bool{}
	fmt.Printf("gen: emptied the build cache %s\n", c.dir)
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// byteSize is a flag value: a size as units.ParseSize reads it, the
// config's sizes ("8GiB", "500M"; "0": no limit).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	n, err := units.ParseSize(s)
	*b = byteSize(n)
	return err
}
