package isolate

import (
	"strings"
	"testing"

	"github.com/kernpool/kernpool/kernel"
)

// field is the value of doctor's line "key: value" in out, and whether
// the line is there.
func field(out, key string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// TestReportString: doctor prints the optional lines only when they have
// something to say, and says "none"/"nothing" for what is empty.
func TestReportString(t *testing.T) {
	base := Report{Isolation: kernel.IsolationSandbox, InitStep: true}
	cases := []struct {
		name string
		edit func(*Report)
		key  string
		want string // "-": no such line
	}{
		{"no host paths", func(r *Report) {}, "host paths", "-"},
		{"read-only host paths only", func(r *Report) { r.ReadOnlyPaths = []string{"/srv"} }, "host paths", "private: ; read-only: /srv"},
		{"private host paths", func(r *Report) { r.PrivatePaths = []string{"/tmp"} }, "host paths", "private: /tmp; read-only:"},
		{"nothing swept", func(r *Report) {}, "crash recovery", "-"},
		{"groups swept", func(r *Report) { r.Swept = 2 }, "crash recovery", "swept 2 leftover kernel group(s)"},
		{"no merging profile", func(r *Report) {}, "memory merge", "-"},
		{"a merging profile", func(r *Report) { r.MemoryMerge = "profiles merge: on" }, "memory merge", "profiles merge: on"},
		{"sandbox mode allows nothing", func(r *Report) {}, "process mode", "-"},
		{"nothing lost", func(r *Report) {}, "missing", "nothing"},
		{"nothing to advise", func(r *Report) {}, "to get more", "-"},
		{"something lost", func(r *Report) { r.Lost, r.Advice = []string{"a", "b"}, []string{"c"} }, "missing", "a; b"},
		{"no cgroup mode", func(r *Report) {}, "cgroup mode", "none"},
		{"delegated, daemon moved", func(r *Report) { r.CgroupActive, r.Delegated, r.DaemonLeaf = true, true, "leaf" }, "delegation", "delegated; daemon moved into leaf"},
		{"delegated", func(r *Report) { r.CgroupActive, r.Delegated = true, true }, "delegation", "delegated"},
		{"daemon moved", func(r *Report) { r.CgroupActive, r.DaemonLeaf = true, "leaf" }, "delegation", "daemon moved into leaf"},
		{"not delegated", func(r *Report) { r.CgroupActive = true }, "delegation", "not delegated (pool parent created from the hierarchy root)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base
			c.edit(&r)
			out := r.String()
			got, ok := field(out, c.key)
			switch {
			case c.want == "-" && ok:
				t.Errorf("line %q: %q, want none\n%s", c.key, got, out)
			case c.want != "-" && got != c.want:
				t.Errorf("line %q: %q (present %t), want %q\n%s", c.key, got, ok, c.want, out)
			}
		})
	}
}

// TestReportWarningAdvice: the start-up warning names what is lost, and advice
// only when there is some.
func TestReportWarningAdvice(t *testing.T) {
	for _, c := range []struct {
		lost, advice []string
		want         string
	}{
		{nil, nil, ""},
		{[]string{"x"}, nil, "reduced kernel isolation: kernels lose x"},
		{[]string{"x"}, []string{"y"}, "reduced kernel isolation: kernels lose x. To get more: y"},
	} {
		if got := (Report{Lost: c.lost, Advice: c.advice}).Warning(); got != c.want {
			t.Errorf("Warning with lost %q, advice %q = %q, want %q", c.lost, c.advice, got, c.want)
		}
	}
}
