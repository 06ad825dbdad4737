package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
)

// freezerPin names the pinned freezer group under the pool parent (not a
// kernel id, so sweeps never touch it).
const freezerPin = "freezer-pin"

// pinFreezer keeps one empty freezer group FROZEN while the pool lives,
// where kills go through the v1 freezer. Since Linux 6.1 the legacy freezer
// switches the freezer_active static key whenever the count of freezing
// groups goes 0 -> 1 or 1 -> 0, and each switch rewrites the kernel's text
// at every freezing() site (int3 patching, three rounds of IPIs to every
// CPU). A freeze and thaw per kill did that twice per kill and once more per
// re-kill: IPI storms on a large host, and under TCG emulation, which throws
// away the translations of every rewritten page, a guest livelocked in the
// first churn test (integration/vmcheck's TestV1StaticKeyStorm
// reproduces it without kernpool). With the pin frozen the key stays on and
// a kill's freeze and thaw rewrite nothing. Best effort: without the pin a
// kill is as correct, only costlier.
func (p *v1Pool) pinFreezer(log hclog.Logger) {
	if !p.has("freezer") || p.udir != "" {
		return
	}
	dir := filepath.Join(p.mount, "freezer", p.parentRel, freezerPin)
	created := true
	if err := os.Mkdir(dir, 0o755); errors.Is(err, os.ErrExist) {
		created = false // a crashed daemon's pin: still empty, reuse it
	} else if err != nil {
		log.Warn("no pinned freezer group: every kill switches the freezer static key", "dir", dir, "error", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		log.Warn("cannot freeze the pinned freezer group", "dir", dir, "error", err)
		if created {
			_ = os.Remove(dir)
		}
		return
	}
	p.pin = dir
}

// unpinFreezer thaws and removes the pin (empty: nothing ever joins it).
func (p *v1Pool) unpinFreezer() error {
	if p.pin == "" {
		return nil
	}
	_ = os.WriteFile(filepath.Join(p.pin, "freezer.state"), []byte("THAWED"), 0)
	if err := os.Remove(p.pin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove pinned freezer group %s: %w", p.pin, err)
	}
	p.pin = ""
	return nil
}
