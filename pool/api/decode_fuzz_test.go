package api

import (
	"bytes"
	"errors"
	"net/http"
	"runtime"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// FuzzDecodeRequest feeds arbitrary bodies to the execute request decoder:
// it never panics, accepts only JSON objects, answers every refusal with
// ErrBadRequest (errTooLarge past the limit), and allocates in proportion
// to what arrived, never more than the body limit allows.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"code":"print(1)","owner":"a","limits":{"memory_max":"64MiB","pids_max":5,"cpu_max":0.5}}`,
		`null`, `[1]`, `"s"`, ` {"code":"1","timeout":"30s","stream":true,"tools":["t"],"passthrough":["A"]}`,
		`{"code":"1"} {}`, `{"limits":{"memory_max":"9999999TiB"}}`, `{"timeout":1e308}`,
	} {
		f.Add([]byte(seed))
	}
	const limit = 4096
	f.Fuzz(func(t *testing.T, body []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var req ExecuteRequest
		err := decodeObject(http.MaxBytesReader(nil, nopCloser{bytes.NewReader(body)}, limit), limit, 0, &req)
		runtime.ReadMemStats(&after)
		if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(64*min(len(body), limit+1)+256<<10); got > bound {
			t.Fatalf("decoding %d bytes allocated %d (bound %d)", len(body), got, bound)
		}
		if err != nil {
			if !errors.Is(err, ErrBadRequest) && !errors.Is(err, pool.ErrBadRequest) {
				t.Fatalf("error %v wraps no bad-request sentinel", err)
			}
			return
		}
		if len(body) > limit {
			t.Fatalf("accepted a %d-byte body over the %d limit", len(body), limit)
		}
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
			t.Fatalf("accepted a body that is not an object: %q", body)
		}
		if req.Limits.MemoryMax < 0 || req.Timeout < 0 {
			t.Fatalf("accepted negative values: %+v", req)
		}
	})
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
