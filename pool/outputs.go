package pool

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A request's OutputsDir asks for the files its cell wrote there: the
// dir (relative to the kernel's working dir) is walked, as the files API
// reads it, before and after the cell, and the regular files that are new
// or whose size or mtime changed are listed in Result.Outputs.
const (
	// MaxOutputs caps Result.Outputs; Result.OutputsTruncated says when
	// more changed.
	MaxOutputs = 100
	// MaxOutputsScan caps the entries one walk visits (dirs included);
	// a bigger tree is walked in part and OutputsTruncated is set.
	MaxOutputsScan = 10000
	// MaxOutputsDepth caps how deep a walk goes below OutputsDir.
	MaxOutputsDepth = 16
	// MaxOutputName caps a listed path; longer ones are left out
	// (OutputsTruncated).
	MaxOutputName = 1024
)

// outputsSnap is what the outputs dir held before a cell.
type outputsSnap struct {
	a         fileArea
	dir       string
	before    map[string]FileEntry
	truncated bool
	err       error
}

// outputsBefore walks rq's outputs dir on lv's kernel (nil when the
// request asks for none).
func (p *Pool) outputsBefore(lv *live, rq normalized) *outputsSnap {
	if rq.outputsDir == "" {
		return nil
	}
	a, err := p.area(lv.id)
	s := &outputsSnap{a: a, dir: rq.outputsDir, err: err}
	if err == nil {
		s.before, s.truncated, s.err = a.walk(s.dir)
	}
	return s
}

// maxWarningMsg bounds the walk error a warning quotes: the messages are
// short today, and a longer one (a path in it) must not grow every result.
const maxWarningMsg = 512

// capWarning cuts msg to maxWarningMsg bytes, marking the cut.
func capWarning(msg string) string {
	if len(msg) > maxWarningMsg {
		return msg[:maxWarningMsg] + "..."
	}
	return msg
}

// apply walks the outputs dir again and lists the changes in res.
func (s *outputsSnap) apply(res *Result) {
	if s == nil || res == nil {
		return
	}
	var after map[string]FileEntry
	truncated := s.truncated
	if s.err == nil && s.a.alive() {
		var t bool
		after, t, s.err = s.a.walk(s.dir)
		truncated = truncated || t
	}
	if s.err != nil {
		res.Warning = strings.TrimSpace(res.Warning + " outputs_dir: " + capWarning(s.err.Error()))
		return
	}
	res.Outputs = []FileEntry{}
	for _, name := range slices.Sorted(maps.Keys(after)) {
		e := after[name]
		if old, ok := s.before[name]; ok && old.Size == e.Size && old.MTime.Equal(e.MTime) {
			continue
		}
		if len(res.Outputs) == MaxOutputs || len(name) > MaxOutputName {
			truncated = true
			continue
		}
		res.Outputs = append(res.Outputs, e)
	}
	res.OutputsTruncated = truncated
}

// checkOutputsDir validates Request.OutputsDir ("." is the working dir).
func checkOutputsDir(dir string) error {
	if dir == "" || dir == "." {
		return nil
	}
	if err := checkFilePath(strings.TrimSuffix(dir, "/"), false); err != nil {
		return badRequest(fmt.Errorf("field \"outputs_dir\": %w", err))
	}
	return nil
}
