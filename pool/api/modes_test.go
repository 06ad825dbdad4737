//go:build unix

package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/pool"
	"github.com/kernpool/kernpool/pool/api"
)

// An unknown mode gets 400 bad_request naming the known modes, through the
// real handler, and the client's error is pool.ErrBadRequest; known modes
// run and their results carry kernel.isolation.
func TestUnknownModeIs400NamingTheModes(t *testing.T) {
	d := startDaemon(t, daemonOpts{pool: func(c *pool.Config) { c.Modes = []string{"default", "untrusted"} }})
	tests := []struct {
		name, body string
		status     int
		code       string
		wantInMsg  []string
	}{
		{"unknown mode", `{"code":"1","mode":"nope"}`, 400, api.CodeBadRequest, []string{`"nope"`, "known modes: default, untrusted"}},
		{"differs only in case", `{"code":"1","mode":"Untrusted"}`, 400, api.CodeBadRequest, []string{`"Untrusted"`, "default, untrusted"}},
		{"known mode", `{"code":"1","mode":"untrusted"}`, 200, "", nil},
		{"no mode is default", `{"code":"1"}`, 200, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := d.raw(t, "POST", "/v1/execute", tt.body)
			if status != tt.status || body.Code != tt.code {
				t.Fatalf("status %d code %q (%q), want %d %q", status, body.Code, body.Error, tt.status, tt.code)
			}
			for _, w := range tt.wantInMsg {
				if !strings.Contains(body.Error, w) {
					t.Errorf("error %q does not mention %q", body.Error, w)
				}
			}
		})
	}
	_, err := d.client.Execute(context.Background(), pool.Request{Mode: "nope", Code: "1"})
	var apiErr *api.APIError
	if !errors.Is(err, pool.ErrBadRequest) || !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "known modes: default, untrusted") {
		t.Fatalf("client error = %v, want a 400 naming the modes", err)
	}
	res, err := d.client.Execute(context.Background(), pool.Request{Mode: "untrusted", Code: "1"})
	if err != nil || res.Kernel.Isolation == nil || res.Kernel.Isolation.Mode == "" {
		t.Fatalf("result = %+v, %v: want kernel.isolation", res, err)
	}
}
