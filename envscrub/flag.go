package envscrub

import (
	"fmt"
	"strings"
)

// PassthroughFlag is a flag.Value for `kernpool serve --passthrough
// NAME[,NAME...]`, repeatable. Set checks the names' syntax only; New
// checks them against the refusal list.
type PassthroughFlag []string

// String joins the names with commas.
func (f *PassthroughFlag) String() string { return strings.Join(*f, ",") }

// Set adds the comma-separated names of one flag occurrence.
func (f *PassthroughFlag) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if err := checkName(n); err != nil {
			return fmt.Errorf("--passthrough %q: %w", v, err)
		}
		*f = append(*f, n)
	}
	return nil
}
