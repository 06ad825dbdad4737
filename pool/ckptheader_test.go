package pool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/internal/testenv"
)

// ckptBlob is a checkpoint of blob whose header JSON is padded with
// spaces to hdrLen bytes.
func ckptBlob(t *testing.T, blob string, hdrLen int) []byte {
	t.Helper()
	hdr := []byte(`{"owner":"o","size":` + strconv.Itoa(len(blob)) + `}`)
	if len(hdr) > hdrLen {
		t.Fatalf("header of %d bytes does not fit %d", len(hdr), hdrLen)
	}
	hdr = append(hdr, bytes.Repeat([]byte(" "), hdrLen-len(hdr))...)
	out := append([]byte(blob), hdr...)
	out = binary.BigEndian.AppendUint32(out, uint32(hdrLen))
	return append(out, "KPCK1\n\x00\x00"...)
}

// A checkpoint header may take 1 MiB, not a byte more.
func TestCkptHeaderUpToOneMiB(t *testing.T) {
	for _, tc := range []struct {
		hdrLen int
		ok     bool
	}{{1 << 20, true}, {1<<20 + 1, false}} {
		b := ckptBlob(t, "state", tc.hdrLen)
		h, err := readHeader(bytes.NewReader(b), int64(len(b)))
		if (err == nil) != tc.ok || tc.ok && (h.Owner != "o" || h.Size != 5) {
			t.Errorf("header of %d bytes: %+v, %v; want ok %v", tc.hdrLen, h, err, tc.ok)
		}
	}
}

// unlistable is a store whose List fails.
type unlistable struct{ CheckpointStore }

func (unlistable) List(context.Context, string) ([]CheckpointEntry, error) {
	return nil, errors.New("list refused")
}

// The retention sweep warns when the store cannot be listed, and only then.
func TestCkptSweepWarnsOnlyWhenUnlisted(t *testing.T) {
	for _, failing := range []bool{false, true} {
		var logs testenv.SyncBuffer
		dir := testTempDir(t)
		local, err := newLocalStore(dir + "/store")
		if err != nil {
			t.Fatal(err)
		}
		var st CheckpointStore = local
		if failing {
			st = unlistable{local}
		}
		c, err := openCkptStore(dir, CheckpointConfig{Store: st, Retention: time.Hour, MaxBytesPerOwner: 1 << 20},
			hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs}))
		if err != nil {
			t.Fatal(err)
		}
		c.sweep(time.Now())
		if n := strings.Count(logs.String(), "checkpoint store not listed"); n != map[bool]int{false: 0, true: 1}[failing] {
			t.Errorf("store failing List %v: %d warnings, logs %q", failing, n, logs.String())
		}
	}
}
