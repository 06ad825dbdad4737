package pool

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// A files path is at most 4096 bytes and 255 per component (docs/api.md):
// each limit itself is accepted, one byte past it refused.
func TestFilePathLimitsInclusive(t *testing.T) {
	comps := func(last int) string { // 20 components of 200 bytes, then last
		return strings.Repeat(strings.Repeat("d", 200)+"/", 20) + strings.Repeat("f", last)
	}
	for _, tc := range []struct {
		name, path string
		want       string // "" accepted, else the refusal's text
	}{
		{"path of 4096 bytes", comps(76), ""},
		{"path of 4097 bytes", comps(77), "file path is 4097 bytes, over the limit of 4096"},
		{"component of 255 bytes", "d/" + strings.Repeat("n", 255), ""},
		{"component of 256 bytes", "d/" + strings.Repeat("n", 256), "a component of 256 bytes, over the limit of 255"},
	} {
		if tc.name == "path of 4096 bytes" && len(tc.path) != 4096 {
			t.Fatalf("%s: built %d bytes", tc.name, len(tc.path))
		}
		err := checkFilePath(tc.path, false)
		if tc.want == "" && err != nil {
			t.Errorf("%s: %v, want accepted", tc.name, err)
		}
		if tc.want != "" && (!errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want ErrBadRequest saying %q", tc.name, err, tc.want)
		}
	}
}

// The files API enters the kernel's own root (/proc/PID/root) exactly
// when the kernel has a mount namespace of its own: another namespace
// alone (a sandbox without "mnt") leaves paths resolved on the daemon's
// filesystem, and "mnt" alone is enough.
func TestFilesAreaMountNamespace(t *testing.T) {
	for _, tc := range []struct {
		ns   []string
		want bool
	}{
		{nil, false},
		{[]string{"net"}, false},
		{[]string{"ipc", "pid", "uts"}, false},
		{[]string{"mnt"}, true},
		{[]string{"ipc", "mnt", "pid", "uts"}, true},
	} {
		p := registryPool(4, 0)
		lv := addIdle(p, "a", defaultName, time.Time{}, false)
		lv.k = &kernel.Kernel{} // area reads only its done channel
		lv.isolation.Namespaces = tc.ns
		p.byID[lv.id].key.cwd = "/work" // its cwd: no staging dir asked for
		a, err := p.area(lv.id)
		if err != nil {
			t.Fatal(err)
		}
		if a.mountNS != tc.want || a.dir != "/work" {
			t.Errorf("namespaces %v: mount namespace %v (dir %q), want %v", tc.ns, a.mountNS, a.dir, tc.want)
		}
	}
}

// An upload announcing exactly the mode's files_max_bytes is written
// whole; one byte more is refused before its body is read (docs/api.md:
// "a Content-Length over it is refused before the body is read").
func TestFilesUploadAtTheLimit(t *testing.T) {
	const limit = 10
	p := newTestPool(t, func(c *Config) {
		c.Policies = map[string]CellPolicy{defaultName: {FilesMaxBytes: limit, InterruptGrace: testenv.Patience}}
	})
	id := run(t, p, Request{Code: "1"}).Kernel.ID
	if n, err := p.WriteFile(t.Context(), id, "exact", strings.NewReader("0123456789"), limit); err != nil || n != 10 {
		t.Fatalf("upload of exactly the limit (10 bytes): %d, %v", n, err)
	}
	rc, size, err := p.OpenFile(id, "exact")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || string(b) != "0123456789" || size != 10 {
		t.Fatalf("read back %q (%d bytes), %v", b, size, err)
	}
	_, err = p.WriteFile(t.Context(), id, "over", unreadBody{t}, limit+1)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "11 bytes") {
		t.Fatalf("upload announcing 11 bytes: %v, want ErrTooLarge naming 11 bytes", err)
	}
}

// unreadBody fails the test when read: a refused upload reads nothing.
type unreadBody struct{ t *testing.T }

func (u unreadBody) Read([]byte) (int, error) {
	u.t.Error("the body of an upload refused by its length was read")
	return 0, io.EOF
}

// KernelOf's refusals name the mode only when the caller named one (the
// API answers with this text): "of mode" never appears for a mode left
// out, nor an empty mode in quotes.
func TestKernelOfMessagesNameTheMode(t *testing.T) {
	p := registryPool(4, 0)
	addIdle(p, "a", defaultName, time.Time{}, false)
	two := addIdle(p, "b", defaultName, time.Time{}, false)
	two.key.cwd, two.id = "/work", "k-b2"
	p.slots[two.key] = &slot{key: two.key, live: two}
	for _, tc := range []struct{ owner, mode, want string }{
		{"c", "", `owner "c" has no live kernel: no such kernel`},
		{"a", "other", `owner "a" has no live kernel of mode "other": no such kernel`},
		{"b", "", `owner "b" has 2 live kernels; name the mode or the kernel id: the live kernel runs with other settings`},
		{"b", defaultName, `owner "b" has 2 live kernels of mode "default"; name the mode or the kernel id: the live kernel runs with other settings`},
	} {
		if _, err := p.KernelOf(tc.owner, tc.mode); err == nil || err.Error() != tc.want {
			t.Errorf("KernelOf(%q, %q): %v, want %q", tc.owner, tc.mode, err, tc.want)
		}
	}
}
