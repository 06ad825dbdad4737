package daemon

import (
	"testing"

	"github.com/kernpool/kernpool/audit"
	"github.com/kernpool/kernpool/cgroup"
	"github.com/kernpool/kernpool/isolate"
	"github.com/kernpool/kernpool/kernel"
	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/rpcsock"
)

// TestClosedErrorsNameWhatClosed: the daemon's layers each have an
// ErrClosed; a message reads one of them after its operation only
// ("execute: pool closed"), so each names what closed, and no two read
// alike.
func TestClosedErrorsNameWhatClosed(t *testing.T) {
	seen := map[string]string{}
	for _, c := range []struct {
		pkg string
		err error
	}{
		{"audit", audit.ErrClosed}, {"cgroup", cgroup.ErrClosed}, {"isolate", isolate.ErrClosed},
		{"kernel", kernel.ErrClosed}, {"pool", pool.ErrClosed}, {"rpcsock", rpcsock.ErrClosed},
	} {
		text := c.err.Error()
		if text == "closed" {
			t.Errorf("%s.ErrClosed reads just %q", c.pkg, text)
		}
		if other, dup := seen[text]; dup {
			t.Errorf("%s.ErrClosed and %s.ErrClosed both read %q", c.pkg, other, text)
		}
		seen[text] = c.pkg
	}
}
