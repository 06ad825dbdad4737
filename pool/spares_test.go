package pool

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// waitSpares waits (on the pool's events) for n ready spares of mode.
func waitSpares(t testing.TB, p *Pool, mode string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitSpares(ctx, mode, n); err != nil {
		t.Fatal(err)
	}
}

// spareIDs lists the ready spares' ids of mode (List).
func spareIDs(p *Pool, mode string) []string {
	var ids []string
	for _, k := range p.List() {
		if k.Spare && k.Mode == mode {
			ids = append(ids, k.ID)
		}
	}
	return ids
}

func withWarm(w map[string]Warm) func(*Config) {
	return func(c *Config) { c.Warm = w }
}

// TestSparesClaimedAndRefilled: a new owner's first cell runs on a ready
// spare (listed before, as a spare without owner), the pool refills to
// the configured count, and a claimed spare never returns: not after its
// owner's cells, not after its owner is shut down.
func TestSparesClaimedAndRefilled(t *testing.T) {
	rec := newRecorder()
	p := newTestPool(t, withWarm(map[string]Warm{"default": {Spares: 2}}), func(c *Config) { c.Observer = rec })
	waitSpares(t, p, "default", 2)
	before := spareIDs(p, "default")
	if len(before) != 2 {
		t.Fatalf("spares listed = %v, want 2", before)
	}
	for _, k := range p.List() {
		if k.Spare && (k.Owner != "" || k.Pid <= 0) {
			t.Fatalf("spare listed as %+v", k)
		}
	}
	res := run(t, p, Request{Owner: "alice", Code: "x = 41\nx + 1"})
	wantStatus(t, res, StatusSuccess)
	if !slices.Contains(before, res.Kernel.ID) || res.Kernel.Reused || res.Kernel.ExecutionCount != 1 || res.Output != "42\n" {
		t.Fatalf("first cell of a new owner: %+v (spares were %v)", res, before)
	}
	claimed := res.Kernel.ID
	if res2 := run(t, p, Request{Owner: "alice", Code: "x"}); res2.Kernel.ID != claimed || !res2.Kernel.Reused || res2.Output != "41\n" {
		t.Fatalf("second cell: %+v", res2)
	}
	waitSpares(t, p, "default", 2)
	after := spareIDs(p, "default")
	if slices.Contains(after, claimed) || len(after) != 2 {
		t.Fatalf("spares after the claim = %v; the claimed %s must never return", after, claimed)
	}
	if n := p.ShutdownOwner("alice"); n != 1 {
		t.Fatalf("ShutdownOwner = %d", n)
	}
	waitSpares(t, p, "default", 2)
	if ids := spareIDs(p, "default"); slices.Contains(ids, claimed) {
		t.Fatalf("claimed spare %s is a spare again after its owner left: %v", claimed, ids)
	}
	// Kill by id stops a spare too; the refill replaces it.
	victim := spareIDs(p, "default")[0]
	if err := p.Kill(victim); err != nil {
		t.Fatalf("Kill(spare): %v", err)
	}
	waitSpares(t, p, "default", 2)
	if ids := spareIDs(p, "default"); slices.Contains(ids, victim) {
		t.Fatalf("killed spare %s still listed: %v", victim, ids)
	}
	st := p.Stats()
	if st.SparesClaimed != 1 || st.SparesStarted != 4 || st.Spares != 2 || st.KernelsStarted != 1 || st.KernelsLive != 0 {
		t.Fatalf("stats = %+v", st)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.spares != 2 || rec.starts != 1 || rec.ends[EndShutdown] != 1 {
		t.Fatalf("observer: spare gauge %d, starts %d, ends %v", rec.spares, rec.starts, rec.ends)
	}
}

// TestSparesEvictedFirst: under MaxKernels, making room for a new key
// stops a spare, never an owner's idle kernel, while spares remain.
func TestSparesEvictedFirst(t *testing.T) {
	p := newTestPool(t, withWarm(map[string]Warm{"default": {Spares: 2}}), func(c *Config) { c.MaxKernels = 3 })
	waitSpares(t, p, "default", 2)
	a := run(t, p, Request{Owner: "a", Code: "v = 'a'"})
	waitSpares(t, p, "default", 2) // refilled: a + 2 spares = the cap
	if n := len(p.List()); n != 3 {
		t.Fatalf("%d kernels listed, want 3", n)
	}
	// Its own limits: no spare fits, so one must make room.
	b := run(t, p, Request{Owner: "b", Code: "v = 'b'", Limits: Limits{PidsMax: 64}})
	if res := run(t, p, Request{Owner: "a", Code: "v"}); res.Kernel.ID != a.Kernel.ID || res.Output != "'a'\n" {
		t.Fatalf("owner a lost its kernel to a new key while a spare was there: %+v", res)
	}
	st := p.Stats()
	if st.SparesEvicted != 1 || st.Evicted != 0 || st.Spares != 1 {
		t.Fatalf("stats = %+v", st)
	}
	// No spare left to stop: now the least recently used owner goes.
	c := run(t, p, Request{Owner: "c", Code: "v = 'c'", Limits: Limits{PidsMax: 64}})
	wantStatus(t, c, StatusSuccess)
	c2 := run(t, p, Request{Owner: "d", Code: "v = 'd'", Limits: Limits{PidsMax: 64}})
	wantStatus(t, c2, StatusSuccess)
	if st := p.Stats(); st.SparesEvicted != 2 || st.Evicted != 1 {
		t.Fatalf("stats after two more keys = %+v", st)
	}
	if res := run(t, p, Request{Owner: "b", Code: "v", Limits: Limits{PidsMax: 64}}); res.Kernel.ID == b.Kernel.ID {
		t.Fatalf("owner b (least recently used) kept its kernel: %+v", res)
	}
}

// TestSetWarmReplacesSpares: a reload that changes a mode's profile digest
// or preload replaces its spares; one that changes nothing keeps them;
// a lower count stops the extra ones.
func TestSetWarmReplacesSpares(t *testing.T) {
	p := newTestPool(t, withWarm(map[string]Warm{"default": {Spares: 2, Profile: "v1"}}))
	waitSpares(t, p, "default", 2)
	first := spareIDs(p, "default")
	if err := p.SetWarm(map[string]Warm{"default": {Spares: 2, Profile: "v1"}}); err != nil {
		t.Fatal(err)
	}
	if got := spareIDs(p, "default"); !sameSet(got, first) {
		t.Fatalf("an unchanged reload replaced spares: %v -> %v", first, got)
	}
	if err := p.SetWarm(map[string]Warm{"default": {Spares: 2, Profile: "v2"}}); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, p, "default", 2)
	second := spareIDs(p, "default")
	for _, id := range first {
		if slices.Contains(second, id) {
			t.Fatalf("spare %s of the old profile survived the reload: %v", id, second)
		}
	}
	if err := p.SetWarm(map[string]Warm{"default": {Spares: 2, Profile: "v2", Preload: []string{"decimal"}}}); err != nil {
		t.Fatal(err)
	}
	waitSpares(t, p, "default", 2)
	res := run(t, p, Request{Code: "import sys; 'decimal' in sys.modules"})
	if slices.Contains(second, res.Kernel.ID) || res.Output != "True\n" {
		t.Fatalf("after a preload change the claimed kernel %s (old spares %v) says %q", res.Kernel.ID, second, res.Output)
	}
	if err := p.SetWarm(map[string]Warm{"default": {Spares: 0, Profile: "v2", Preload: []string{"decimal"}}}); err != nil {
		t.Fatal(err)
	}
	if ids := spareIDs(p, "default"); len(ids) != 0 {
		t.Fatalf("spares = %v after the count went to 0", ids)
	}
	if err := p.SetWarm(map[string]Warm{"default": {Preload: []string{"not a module"}}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("SetWarm with a bad module name = %v", err)
	}
}

// TestSpareOfAChangedInterpreterIsNotClaimed: a spare whose interpreter
// file is not the one a request resolves now (upgraded) is stopped, and
// the request starts a kernel of the new file.
func TestSpareOfAChangedInterpreterIsNotClaimed(t *testing.T) {
	p := newTestPool(t, withWarm(map[string]Warm{"default": {Spares: 1}}))
	waitSpares(t, p, "default", 1)
	stale := spareIDs(p, "default")[0]
	other, err := os.Stat(os.Args[0]) // any other file
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.sp.ready["default"][0].interp = other
	p.mu.Unlock()
	res := run(t, p, Request{Code: "1"})
	if res.Kernel.ID == stale || p.Stats().SparesClaimed != 0 {
		t.Fatalf("a stale spare %s was claimed: %+v", stale, res)
	}
	waitSpares(t, p, "default", 1)
	if ids := spareIDs(p, "default"); slices.Contains(ids, stale) {
		t.Fatalf("the stale spare is still offered: %v", ids)
	}
}

// TestPreloadColdAndBroken: preload applies to a cold start too (no
// spares), and a module that does not import fails the start naming it.
func TestPreloadColdAndBroken(t *testing.T) {
	p := newTestPool(t, withWarm(map[string]Warm{"default": {Preload: []string{"decimal"}}, "broken": {Preload: []string{"no_such_mod_q"}}}))
	res := run(t, p, Request{Code: "import sys; ('decimal' in sys.modules, 'decimal' in dir())"})
	if res.Output != "(True, False)\n" {
		t.Fatalf("cold kernel with preload says %q", res.Output)
	}
	_, err := p.Execute(t.Context(), Request{Mode: "broken", Code: "1"})
	if !errors.Is(err, ErrSpawn) || !strings.Contains(err.Error(), "No module named 'no_such_mod_q'") {
		t.Fatalf("broken preload = %v", err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
