package testenv

import "testing"

func TestRequireCgroupModeSkipsOtherLayouts(t *testing.T) {
	RequireRoot(t)
	for _, tc := range []struct {
		have    int
		want    []int
		skipped bool
	}{
		{have: 1, want: []int{1, 2}, skipped: false},
		{have: 3, want: []int{1, 2}, skipped: true},
		{have: 0, want: nil, skipped: true},
	} {
		var skipped bool
		t.Run("", func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			RequireCgroupMode(t, tc.have, tc.want...)
		})
		if skipped != tc.skipped {
			t.Errorf("have %d want %v: skipped %v, want %v", tc.have, tc.want, skipped, tc.skipped)
		}
	}
}
