package pool_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/memtest"
	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/pool"
)

// maxFilesGrowth bounds the daemon's peak RSS growth while it streams a
// file of any size: the copy buffers, never the file.
const maxFilesGrowth = 16 << 20

// manyFiles is a dir's size in the bound tests: 3x pool.MaxListEntries
// and pool.MaxOutputsScan (10,000 each), written out.
const manyFiles = 30000

// filesPool is a pool of real sandboxed kernels (uid, namespaces, tmpfs
// staging dir) whose default mode has a 512 MiB working area and a
// "small" mode a 4 MiB one; uploads are capped at maxBytes.
func filesPool(t *testing.T, maxBytes int64) *pool.Pool {
	t.Helper()
	testenv.RequireRoot(t)
	res := isolate.LimitsResources(isolate.Limits{MemoryMax: 1 << 30, PidsMax: 512})
	iso, state := newRealIsolatorWith(t, func(cfg *isolate.Config) {
		cfg.Profiles = map[string]isolate.Profile{
			isolate.DefaultProfile: {Resources: res, TmpSize: 512 << 20},
			"small":                {Resources: res, TmpSize: 4 << 20},
		}
	})
	return newTestPool(t, func(c *pool.Config) {
		c.StateDir = state
		c.Sandboxes = iso
		c.Policies = map[string]pool.CellPolicy{"default": {FilesMaxBytes: maxBytes}}
	})
}

// An upload is read by the next cell byte-identical and is the kernel's
// own file; a file the cell writes downloads byte-identical; both ways
// the daemon's RSS stays bounded whatever the size (1 MiB, 100 MiB).
func TestFilesRoundTripStreams(t *testing.T) {
	p := filesPool(t, 200<<20)
	res := run(t, p, pool.Request{Owner: "a", Code: "import os\nos.getuid()"})
	id := res.Kernel.ID
	for _, n := range []int64{1 << 20, 100 << 20} {
		var wrote int64
		var err error
		growth := memtest.PeakGrowth(t, func() {
			wrote, err = p.WriteFile(t.Context(), id, "in/data.bin", testenv.NewPattern(n), -1)
		})
		if err != nil || wrote != n {
			t.Fatalf("upload %d: %d bytes, %v", n, wrote, err)
		}
		t.Logf("upload of %d MiB: daemon peak RSS growth %.1f MiB", n>>20, float64(growth)/(1<<20))
		if growth > maxFilesGrowth && !memtest.RaceEnabled {
			t.Fatalf("upload of %d bytes grew the daemon's peak RSS by %d, over %d", n, growth, maxFilesGrowth)
		}
		code := "import hashlib, os\nst = os.stat('in/data.bin')\nh = hashlib.sha256()\nwith open('in/data.bin', 'rb') as f:\n" +
			"    for b in iter(lambda: f.read(1 << 20), b''): h.update(b)\n" +
			"with open('out.bin', 'wb') as f:\n    with open('in/data.bin', 'rb') as g:\n        for b in iter(lambda: g.read(1 << 20), b''): f.write(b)\n" +
			"print(h.hexdigest(), st.st_size, st.st_uid == os.getuid(), oct(st.st_mode & 0o777))"
		res = run(t, p, pool.Request{Owner: "a", Code: code})
		if want := fmt.Sprintf("%s %d True 0o600\n", testenv.PatternSum(n), n); res.Output != want {
			t.Fatalf("the cell read %q, want %q (%s)", res.Output, want, res.Error)
		}
		h := sha256.New()
		growth = memtest.PeakGrowth(t, func() {
			f, size, err := p.OpenFile(id, "out.bin")
			if err != nil || size != n {
				t.Fatalf("download: size %d, %v", size, err)
			}
			defer f.Close()
			if _, err := io.Copy(h, f); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("download of %d MiB: daemon peak RSS growth %.1f MiB", n>>20, float64(growth)/(1<<20))
		if hex.EncodeToString(h.Sum(nil)) != testenv.PatternSum(n) {
			t.Fatalf("download of %d bytes is not the cell's file", n)
		}
		if growth > maxFilesGrowth && !memtest.RaceEnabled {
			t.Fatalf("download of %d bytes grew the daemon's peak RSS by %d, over %d", n, growth, maxFilesGrowth)
		}
	}
	l, err := p.ListFiles(id, "in")
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Name != "data.bin" || l.Entries[0].Size != 100<<20 || l.Entries[0].Type != pool.FileRegular {
		t.Fatalf("listing of in/: %+v, %v", l, err)
	}
	if err := p.DeleteFile(id, "in/data.bin"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.OpenFile(id, "in/data.bin"); !errors.Is(err, pool.ErrNoFile) {
		t.Fatalf("read after delete: %v, want pool.ErrNoFile", err)
	}
}

// Symlinks the tenant plants (to /etc/shadow, to another kernel's working
// dir, a symlinked dir) do not redirect the daemon: a read is refused, a
// write replaces the link itself and never touches its target.
func TestFilesPlantedSymlinksDoNotRedirect(t *testing.T) {
	p := filesPool(t, 1<<20)
	victim := run(t, p, pool.Request{Owner: "victim", Code: "open('secret.txt', 'w').write('victim data')\nimport os\nprint(os.getcwd())"})
	victimDir := strings.TrimSpace(victim.Output)
	shadow, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Skipf("no /etc/shadow to aim at: %v", err)
	}
	code := fmt.Sprintf("import os\nos.symlink('/etc/shadow', 'out.txt')\nos.symlink('/etc', 'etc')\nos.symlink(%q, 'other')\n"+
		"os.symlink(%q, 'other.txt')\nos.mkdir('d')\nos.symlink('/etc/passwd', 'd/p')", victimDir, filepath.Join(victimDir, "secret.txt"))
	res := run(t, p, pool.Request{Owner: "tenant", Code: code})
	wantStatus(t, res, pool.StatusSuccess)
	id := res.Kernel.ID
	for _, path := range []string{"out.txt", "etc/shadow", "etc/passwd", "other/secret.txt", "other.txt", "d/p"} {
		f, _, err := p.OpenFile(id, path)
		if err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Fatalf("read of %s through a planted symlink returned %d bytes", path, len(b))
		}
		if !errors.Is(err, pool.ErrNotRegular) && !errors.Is(err, pool.ErrNoFile) {
			t.Fatalf("read of %s: %v, want a refusal", path, err)
		}
	}
	for _, dir := range []string{"etc", "other"} {
		if l, err := p.ListFiles(id, dir); err == nil {
			t.Fatalf("listing of %s through a planted symlink: %d entries", dir, len(l.Entries))
		}
	}
	for _, path := range []string{"etc/kernpool-planted", "other/planted.txt", "other/secret.txt"} {
		if _, err := p.WriteFile(t.Context(), id, path, strings.NewReader("x"), 1); err == nil {
			t.Fatalf("write of %s through a planted dir symlink succeeded", path)
		}
	}
	if err := p.DeleteFile(id, "other/secret.txt"); err == nil {
		t.Fatal("delete through a planted dir symlink succeeded")
	}
	// A write onto a symlink replaces the link, not its target.
	for _, path := range []string{"out.txt", "other.txt"} {
		if _, err := p.WriteFile(t.Context(), id, path, strings.NewReader("mine"), 4); err != nil {
			t.Fatalf("write onto the symlink %s: %v", path, err)
		}
	}
	if b, _ := os.ReadFile("/etc/shadow"); !bytes.Equal(b, shadow) {
		t.Fatal("/etc/shadow changed")
	}
	if _, err := os.Lstat("/etc/kernpool-planted"); err == nil {
		t.Fatal("a file was created in /etc")
	}
	res = run(t, p, pool.Request{Owner: "tenant", Code: "import os\nprint(os.path.islink('out.txt'), open('out.txt').read())"})
	if res.Output != "False mine\n" {
		t.Fatalf("after the write the tenant sees %q", res.Output)
	}
	res = run(t, p, pool.Request{Owner: "victim", Code: "print(open('secret.txt').read())"})
	if res.Output != "victim data\n" {
		t.Fatalf("the victim's file is now %q", res.Output)
	}
}

// The daemon acts as the kernel's uid: a file the kernel cannot read (its
// own, mode 000) is refused, though the daemon is root.
func TestFilesAsTheKernelsUID(t *testing.T) {
	p := filesPool(t, 1<<20)
	res := run(t, p, pool.Request{Code: "import os\nopen('locked', 'w').write('x')\nos.chmod('locked', 0)\nos.mkdir('ro')\nos.chmod('ro', 0o500)"})
	wantStatus(t, res, pool.StatusSuccess)
	if _, _, err := p.OpenFile(res.Kernel.ID, "locked"); !errors.Is(err, pool.ErrFileAccess) {
		t.Fatalf("read of a mode-000 file: %v, want pool.ErrFileAccess", err)
	}
	if _, err := p.WriteFile(t.Context(), res.Kernel.ID, "ro/x", strings.NewReader("x"), 1); !errors.Is(err, pool.ErrFileAccess) {
		t.Fatalf("write into a read-only dir: %v, want pool.ErrFileAccess", err)
	}
}

// Every bound, with a hostile input and the figure: each refused with a
// clear error, nothing left behind.
func TestFilesHostileInputs(t *testing.T) {
	const limit = 1 << 20
	p := filesPool(t, limit)
	// A dir three times the listing and outputs scan bounds (10,000
	// entries each): 100,000 creates took up to 400 s of a guest's
	// 30-minute budget under TCG on a loaded host, and the bounds show
	// as well at 30,000. The timeout only stops a hung cell.
	res := run(t, p, pool.Request{Code: fmt.Sprintf("import os\nos.mkdir('many')\nfor i in range(%d): open('many/f%%06d' %% i, 'w').close()", manyFiles), Timeout: 15 * time.Minute})
	wantStatus(t, res, pool.StatusSuccess)
	id := res.Kernel.ID
	for _, c := range []struct{ name, path, want string }{
		{"dotdot", "../x", `".." component`},
		{"inner dotdot", "a/../../x", `".." component`},
		{"absolute", "/etc/passwd", "is absolute"},
		{"NUL", "a\x00b", "NUL byte"},
		{"overlong name", strings.Repeat("n", pool.MaxFileName+1), "over the limit of 255"},
		{"overlong path", strings.Repeat("d/", pool.MaxFilePath/2+1), "over the limit of 4096"},
		{"empty component", "a//b", "empty"},
		{"backslash", `..\x`, "backslash"},
	} {
		_, err := p.WriteFile(t.Context(), id, c.path, strings.NewReader("x"), 1)
		if !errors.Is(err, pool.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: write %v, want pool.ErrBadRequest saying %q", c.name, err, c.want)
		}
		if _, _, err := p.OpenFile(id, c.path); !errors.Is(err, pool.ErrBadRequest) {
			t.Errorf("%s: read %v, want pool.ErrBadRequest", c.name, err)
		}
	}
	// Over files_max_bytes: announced, refused before a byte is read;
	// unannounced, refused at limit+1 bytes and nothing is kept.
	if _, err := p.WriteFile(t.Context(), id, "big", failReader{t}, limit+1); !errors.Is(err, pool.ErrTooLarge) {
		t.Fatalf("announced oversize upload: %v, want pool.ErrTooLarge", err)
	}
	if _, err := p.WriteFile(t.Context(), id, "big", testenv.NewPattern(limit+1), -1); !errors.Is(err, pool.ErrTooLarge) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("oversize upload: %v, want pool.ErrTooLarge naming the limit", err)
	}
	if n, err := p.WriteFile(t.Context(), id, "exact", testenv.NewPattern(limit), -1); err != nil || n != limit {
		t.Fatalf("upload of exactly the limit: %d, %v", n, err)
	}
	l, err := p.ListFiles(id, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Name == "big" || strings.HasPrefix(e.Name, ".kernpool-upload-") {
			t.Fatalf("a refused upload left %s", e.Name)
		}
	}
	// A dir of 30,000 entries lists pool.MaxListEntries of them, bounded.
	growth := memtest.PeakGrowth(t, func() { l, err = p.ListFiles(id, "many") })
	if err != nil || len(l.Entries) != pool.MaxListEntries || !l.Truncated {
		t.Fatalf("listing of %d entries: %d entries, truncated %v, %v", manyFiles, len(l.Entries), l.Truncated, err)
	}
	t.Logf("listing of %d entries: %d listed, daemon peak RSS growth %.1f MiB", manyFiles, len(l.Entries), float64(growth)/(1<<20))
	if growth > 32<<20 && !memtest.RaceEnabled {
		t.Fatalf("listing grew the daemon's peak RSS by %d", growth)
	}
	// outputs_dir on the same dir walks pool.MaxOutputsScan entries, no more.
	var out *pool.Result
	growth = memtest.PeakGrowth(t, func() { out = run(t, p, pool.Request{Code: "open('many/new', 'w').close()", OutputsDir: "many"}) })
	t.Logf("outputs_dir over %d entries: %d listed, truncated %v, daemon peak RSS growth %.1f MiB", manyFiles, len(out.Outputs), out.OutputsTruncated, float64(growth)/(1<<20))
	if !out.OutputsTruncated || len(out.Outputs) > pool.MaxOutputs || (growth > 32<<20 && !memtest.RaceEnabled) {
		t.Fatalf("outputs_dir over %d entries: %d listed, truncated %v, peak RSS growth %d", manyFiles, len(out.Outputs), out.OutputsTruncated, growth)
	}
}

// failReader fails the test when read: a refused upload reads nothing.
type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Error("the body of an upload refused by its length was read")
	return 0, io.EOF
}

// An upload that fills the kernel's tmpfs is refused with pool.ErrNoSpace and
// leaves nothing behind.
func TestFilesFullTmpfsIsNoSpace(t *testing.T) {
	p := filesPool(t, 64<<20)
	res := run(t, p, pool.Request{Mode: "small", Code: "1"})
	id := res.Kernel.ID
	_, err := p.WriteFile(t.Context(), id, "fill", testenv.NewPattern(8<<20), -1)
	if !errors.Is(err, pool.ErrNoSpace) {
		t.Fatalf("upload of 8 MiB into a 4 MiB tmpfs: %v, want pool.ErrNoSpace", err)
	}
	l, err := p.ListFiles(id, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Name == "fill" || strings.HasPrefix(e.Name, ".kernpool-upload-") {
			t.Fatalf("a failed upload left %s (%d bytes)", e.Name, e.Size)
		}
	}
}

// The working dir is the kernel's own view of its cwd: with a cwd of
// /tmp, which the sandbox replaces by a private tmpfs, files go to and
// come from the kernel's /tmp, never the host's.
func TestFilesSeeTheKernelsMountNamespace(t *testing.T) {
	p := filesPool(t, 1<<20)
	name := fmt.Sprintf("kernpool-files-%d", os.Getpid())
	res := run(t, p, pool.Request{Cwd: "/tmp", Code: fmt.Sprintf("open(%q, 'w').write('inside')", name+".out")})
	wantStatus(t, res, pool.StatusSuccess)
	id := res.Kernel.ID
	t.Cleanup(func() { _ = os.Remove("/tmp/" + name + ".in"); _ = os.Remove("/tmp/" + name + ".out") })
	f, _, err := p.OpenFile(id, name+".out")
	if err != nil {
		t.Fatalf("read of the kernel's /tmp file: %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "inside" {
		t.Fatalf("read %q", b)
	}
	if _, err := p.WriteFile(t.Context(), id, name+".in", strings.NewReader("up"), 2); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{name + ".in", name + ".out"} {
		if _, err := os.Lstat("/tmp/" + n); err == nil {
			t.Fatalf("%s is in the host's /tmp", n)
		}
	}
	res = run(t, p, pool.Request{Cwd: "/tmp", Code: fmt.Sprintf("print(open(%q).read())", name+".in")})
	if res.Output != "up\n" {
		t.Fatalf("the kernel read %q (%s)", res.Output, res.Error)
	}
}

// outputs_dir lists what the cell wrote there, new or changed, bounded:
// at most pool.MaxOutputs paths of at most pool.MaxOutputName bytes, symlinks not
// followed, the untouched and the outside left out.
func TestOutputsDirListsWhatTheCellWrote(t *testing.T) {
	p := filesPool(t, 1<<20)
	res := run(t, p, pool.Request{Code: "import os\nos.makedirs('out/keep')\nopen('out/keep/old.txt', 'w').write('old')\nopen('out/changed.txt', 'w').write('a')"})
	wantStatus(t, res, pool.StatusSuccess)
	deep := strings.Repeat("d", 250)
	code := fmt.Sprintf("import os\nopen('out/changed.txt', 'w').write('bb')\nopen('out/new.csv', 'w').write('1,2')\nos.makedirs('out/sub')\n"+
		"open('out/sub/plot.png', 'wb').write(b'x' * 10)\nopen('outside.txt', 'w').write('x')\nos.symlink('/etc', 'out/etc')\n"+
		"p = 'out/' + '/'.join([%q] * 5)\nos.makedirs(p)\nopen(p + '/f', 'w').write('x')", deep)
	res = run(t, p, pool.Request{Code: code, OutputsDir: "out"})
	wantStatus(t, res, pool.StatusSuccess)
	var names []string
	for _, e := range res.Outputs {
		names = append(names, fmt.Sprintf("%s:%d", e.Name, e.Size))
	}
	if got, want := strings.Join(names, " "), "out/changed.txt:2 out/new.csv:3 out/sub/plot.png:10"; got != want || !res.OutputsTruncated {
		t.Fatalf("outputs %q (truncated %v), want %q and truncated (a path over %d bytes)", got, res.OutputsTruncated, want, pool.MaxOutputName)
	}
	res = run(t, p, pool.Request{Code: "import os\nos.makedirs('many')\nfor i in range(150): open('many/%03d' % i, 'w').close()", OutputsDir: "many"})
	if len(res.Outputs) != pool.MaxOutputs || !res.OutputsTruncated || res.Outputs[0].Name != "many/000" {
		t.Fatalf("150 new files: %d listed, truncated %v", len(res.Outputs), res.OutputsTruncated)
	}
	res = run(t, p, pool.Request{Code: "1", OutputsDir: "out"})
	if len(res.Outputs) != 0 || res.Outputs == nil {
		t.Fatalf("a cell that wrote nothing lists %+v", res.Outputs)
	}
	for _, dir := range []string{"../x", "/etc", "a\x00"} {
		if _, err := p.Execute(t.Context(), pool.Request{Code: "1", OutputsDir: dir}); !errors.Is(err, pool.ErrBadRequest) || !strings.Contains(err.Error(), "outputs_dir") {
			t.Fatalf("outputs_dir %q: %v, want pool.ErrBadRequest naming the field", dir, err)
		}
	}
}

// The files API works while a cell runs: the cell waits for a file that
// an upload made during the cell brings, and a download during the cell
// reads what it wrote so far.
func TestFilesWhileACellRuns(t *testing.T) {
	p := filesPool(t, 1<<20)
	id := run(t, p, pool.Request{Owner: "busy", Code: "1"}).Kernel.ID
	ready := make(chan struct{}, 1)
	done := make(chan *pool.Result, 1)
	go func() {
		res, err := p.Execute(context.Background(), pool.Request{Owner: "busy",
			Code: "import os, select\nopen('progress.txt', 'w').write('half')\nprint('ready', flush=True)\n" +
				"r, w = os.pipe()\nwhile not os.path.exists('go.txt'): select.select([r], [], [], 0.01)\nprint(open('go.txt').read())",
			Stream: func(e pool.Event) {
				if strings.Contains(e.Text, "ready") {
					select {
					case ready <- struct{}{}:
					default:
					}
				}
			}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case <-ready:
	case <-time.After(testenv.Patience):
		t.Fatal("the cell did not start")
	}
	f, _, err := p.OpenFile(id, "progress.txt")
	if err != nil {
		t.Fatalf("download while the cell runs: %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "half" {
		t.Fatalf("read %q while the cell runs", b)
	}
	if _, err := p.WriteFile(t.Context(), id, "go.txt", strings.NewReader("go on"), 5); err != nil {
		t.Fatalf("upload while the cell runs: %v", err)
	}
	select {
	case res := <-done:
		if res == nil || res.Output != "ready\ngo on\n" {
			t.Fatalf("the cell's result: %+v", res)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the cell did not see the upload")
	}
}

// A path of exactly pool.MaxOutputName bytes is listed; one byte more is
// left out and marks the list truncated.
func TestOutputsNameAtTheCap(t *testing.T) {
	p := filesPool(t, 1<<20)
	dirs := "out/" + strings.Repeat(strings.Repeat("d", 250)+"/", 4) // 1008 bytes
	at, over := dirs+strings.Repeat("f", 16), dirs+strings.Repeat("g", 17)
	if len(at) != 1024 || pool.MaxOutputName != 1024 {
		t.Fatalf("the path is %d bytes, the cap %d: want both 1024", len(at), pool.MaxOutputName)
	}
	code := fmt.Sprintf("import os\nos.makedirs(%q)\nopen(%q, 'w').write('x')\nopen(%q, 'w').write('y')", dirs, at, over)
	res := run(t, p, pool.Request{Code: code, OutputsDir: "out"})
	wantStatus(t, res, pool.StatusSuccess)
	if len(res.Outputs) != 1 || res.Outputs[0].Name != at || !res.OutputsTruncated {
		t.Fatalf("outputs %+v (truncated %v), want only the %d-byte path, truncated", res.Outputs, res.OutputsTruncated, len(at))
	}
}

// An outputs_dir the pool may not walk lists nothing and says why in the
// result's warning: one that goes through a symlink, one the kernel's
// uid may not read.
func TestOutputsDirUnwalkableIsAWarning(t *testing.T) {
	p := filesPool(t, 1<<20)
	wantStatus(t, run(t, p, pool.Request{Code: "import os\nos.symlink('/etc', 'lnk')"}), pool.StatusSuccess)
	for dir, want := range map[string]string{
		"lnk":    "a symlink, which is never followed",
		"locked": "the kernel's uid may not access the path: permission denied",
	} {
		res := run(t, p, pool.Request{Code: "import os\nos.makedirs('locked', exist_ok=True)\nos.chmod('locked', 0)", OutputsDir: dir})
		wantStatus(t, res, pool.StatusSuccess)
		if len(res.Outputs) != 0 || !strings.HasPrefix(res.Warning, "outputs_dir: ") || !strings.HasSuffix(res.Warning, want) {
			t.Errorf("outputs_dir %q: outputs %+v, warning %q; want none and a warning ending %q", dir, res.Outputs, res.Warning, want)
		}
	}
}
