package pool_test

import (
	"errors"
	"testing"

	"github.com/kernpool/kernpool/envscrub"
	"github.com/kernpool/kernpool/pool"
)

// TestErrorMessagesStateTheirCauseOnce: errors are wrapped with the
// operation only, so each message names its operation and cause once, with
// no package prefixes, while errors.Is still finds every sentinel. The
// expected texts are written out, not built from the code's constants.
func TestErrorMessagesStateTheirCauseOnce(t *testing.T) {
	scrub, err := envscrub.New(envscrub.Config{Parent: func() []string { return []string{"PATH=/usr/bin:/bin"} }})
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPool(t, func(c *pool.Config) { c.Env = scrub })
	for _, tc := range []struct {
		name string
		call func() error
		want string
		is   []error
	}{
		{
			name: "refused passthrough",
			call: func() error {
				_, err := p.Execute(t.Context(), pool.Request{Code: "1", Passthrough: []string{"OPENAI_API_KEY"}})
				return err
			},
			want: `execute: kernel environment: passthrough "OPENAI_API_KEY" refused by refusal list entry "OPENAI_API_KEY"`,
			is:   []error{pool.ErrBadRequest, envscrub.ErrRefused},
		},
		{
			name: "reserved passthrough",
			call: func() error {
				_, err := p.Execute(t.Context(), pool.Request{Code: "1", Passthrough: []string{"KERNPOOL_SENTINEL"}})
				return err
			},
			want: `execute: kernel environment: passthrough "KERNPOOL_SENTINEL" refused by the reserved prefix KERNPOOL_`,
			is:   []error{pool.ErrBadRequest, envscrub.ErrRefused},
		},
		{
			name: "owner not UTF-8",
			call: func() error {
				_, err := p.Execute(t.Context(), pool.Request{Code: "1", Owner: "a\xffb"})
				return err
			},
			want: "execute: owner is not valid UTF-8: bad request",
			is:   []error{pool.ErrBadRequest},
		},
		{
			name: "kill of an unknown kernel",
			call: func() error { return p.Kill("k0000000000000000") },
			want: `kill "k0000000000000000": no such kernel`,
			is:   []error{pool.ErrNotFound},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("message\n got: %s\nwant: %s", err, tc.want)
			}
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(err, %v) = false", target)
				}
			}
		})
	}
}
