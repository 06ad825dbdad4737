package pool

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
	"github.com/kernpool/kernpool/kernel"
)

// A request naming a mode the pool was not configured with is refused
// with a typed error that names the known modes; configured modes (and the
// empty mode, "default") are served.
func TestUnknownModeIsRefused(t *testing.T) {
	testenv.RequirePython(t)
	p := newTestPool(t, func(c *Config) { c.Modes = []string{"default", "small"} })
	_, err := p.Execute(context.Background(), Request{Mode: "nope", Code: "print(1)"})
	var um *UnknownModeError
	if !errors.As(err, &um) || !errors.Is(err, ErrBadRequest) || !errors.Is(err, ErrUnknownMode) {
		t.Fatalf("err = %v, want an *UnknownModeError that is ErrBadRequest and ErrUnknownMode", err)
	}
	if um.Mode != "nope" || len(um.Known) != 2 || err.Error() != `execute: mode "nope" is not configured; known modes: default, small` {
		t.Errorf("error = %q (%+v)", err, um)
	}
	if len(p.List()) != 0 {
		t.Errorf("a kernel was started for an unknown mode")
	}
	for _, mode := range []string{"", "default", "small"} {
		wantStatus(t, run(t, p, Request{Mode: mode, Code: "print(1)"}), StatusSuccess)
	}
}

// Every result and every listing carries the kernel's isolation: here the
// process-group sandbox of a pool without a SandboxFactory.
func TestResultCarriesIsolation(t *testing.T) {
	testenv.RequirePython(t)
	p := newTestPool(t)
	res := run(t, p, Request{Code: "print(1)"})
	wantStatus(t, res, StatusSuccess)
	is := res.Kernel.Isolation
	if is == nil {
		t.Fatal("result without kernel.isolation")
	}
	wantUID := os.Getuid()
	if runtime.GOOS == "windows" {
		wantUID = -1
	}
	want := kernel.Isolation{Mode: kernel.IsolationProcess, UID: wantUID, Namespaces: []string{}, Network: true}
	if is.Mode != want.Mode || is.UID != want.UID || is.Network != want.Network || is.Seccomp || is.MemoryMax != 0 || len(is.Namespaces) != 0 {
		t.Errorf("isolation = %+v, want %+v", *is, want)
	}
	list := p.List()
	if len(list) != 1 || list[0].Isolation.Mode != kernel.IsolationProcess || list[0].Isolation.UID != wantUID {
		t.Errorf("listing = %+v", list)
	}
}
