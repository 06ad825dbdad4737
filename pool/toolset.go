package pool

import (
	"fmt"
	"slices"
	"strings"
)

// toolSetNote is the warning of an implicit request whose cell ran on a
// new kernel while the same owner has a live kernel that differs from
// the request's key only by its tool set: the tool set is part of an
// implicit kernel's key (docs/api.md, "Sessions"), so the cell
// did not see that kernel's variables, and the result says so rather than
// moving the owner silently. Sessions refuse such a request instead
// (ErrSessionMismatch). "" when nothing needs saying, and when the key
// had a kernel before (known is true: reused, or replaced after a reset
// or a death, which the result reports as state_reset).
func (p *Pool) toolSetNote(rq normalized, known bool) string {
	if known || rq.key.session != "" {
		return ""
	}
	p.mu.Lock()
	var others []string
	for k, s := range p.slots {
		if s.live == nil || k.session != "" || k.tools == rq.key.tools {
			continue
		}
		if k.owner == rq.key.owner && k.mode == rq.key.mode && k.interpreter == rq.key.interpreter && k.cwd == rq.key.cwd {
			others = append(others, "["+k.tools+"]")
		}
	}
	p.mu.Unlock()
	if len(others) == 0 {
		return ""
	}
	slices.Sort(others)
	return fmt.Sprintf("This cell ran on a new kernel: the tool set [%s] is part of the kernel's key, and this owner's live kernel with tool set %s, whose variables this cell did not see, is unchanged. Send the same tools to keep one kernel, or use a session.",
		rq.key.tools, strings.Join(others, ", "))
}
