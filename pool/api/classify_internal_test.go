package api

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/kernpool/kernpool/pool"
)

// docStatuses reads docs/api.md's error table: the HTTP status of each
// error code, as documented.
func docStatuses(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^ *\\| ([1-5][0-9][0-9]) \\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		status, _ := strconv.Atoi(m[1])
		out[m[2]] = status
	}
	if len(out) < 20 {
		t.Fatalf("docs/api.md's error table: only %d codes found", len(out))
	}
	return out
}

// TestPoolErrorsAnswerTheDocumentedStatus: each error the pool returns
// (wrapped, as the pool wraps them) is answered with the code this list
// names, independently of classify, and with the status docs/api.md
// gives that code.
func TestPoolErrorsAnswerTheDocumentedStatus(t *testing.T) {
	docs := docStatuses(t)
	for _, tc := range []struct {
		err  error
		code string
	}{
		{pool.ErrBadRequest, CodeBadRequest}, {ErrBadRequest, CodeBadRequest},
		{pool.ErrNotFound, CodeNotFound}, {pool.ErrNoFile, CodeNotFound},
		{pool.ErrTooLarge, CodeTooLarge}, {pool.ErrNoSpace, CodeNoSpace},
		{pool.ErrNotRegular, CodeNotRegular}, {pool.ErrFileAccess, CodeForbidden},
		{pool.ErrCapacity, CodeCapacity}, {&pool.QuotaError{Quota: "max_kernels_per_owner"}, CodeQuota},
		{pool.ErrClosed, CodeClosed}, {pool.ErrSessionMismatch, CodeSessionMismatch},
		{pool.ErrConflict, CodeConflict}, {pool.ErrIdle, CodeIdle}, {pool.ErrBusy, CodeBusy},
		{pool.ErrInterrupted, CodeInterrupted}, {pool.ErrKernelDied, CodeKernelDied},
		{pool.ErrSpawn, CodeSpawnFailed}, {errors.New("anything else"), CodeInternal},
	} {
		status, code := classify(fmt.Errorf("op: %w", tc.err))
		if code != tc.code || status != docs[tc.code] || status == 0 {
			t.Errorf("%v: answered %d %q, want %q with docs/api.md's status %d", tc.err, status, code, tc.code, docs[tc.code])
		}
	}
}
