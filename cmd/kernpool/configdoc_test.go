package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kernpool/kernpool/pool/daemon"
)

// docDefault is one row of a docs/config.md settings table whose default
// is a literal.
type docDefault struct {
	block, attr, flag, literal string
}

// configDocDefaults reads the settings tables of docs/config.md: the
// block each belongs to (from the "## block { }" headings), the
// attribute, its flag (when the table has a flag column) and the
// default, when that is one HCL literal (`"30m"`, `64`, `true`).
func configDocDefaults(t *testing.T) []docDefault {
	t.Helper()
	src, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile("^## (?:([a-z]+)(?: \"NAME\")? \\{ \\}|Top-level settings)")
	literal := regexp.MustCompile("^`(\"[^\"`]*\"|[0-9.]+|true|false)`$")
	flagRe := regexp.MustCompile("`(--[a-z-]+)")
	var out []docDefault
	block, cols := "", 0
	for _, line := range strings.Split(string(src), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			block, cols = m[1], 0
			continue
		}
		if strings.HasPrefix(line, "## ") {
			block, cols = "-", 0 // a section without settings tables
			continue
		}
		if block == "-" || !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if cells[0] == "attribute" {
			cols = len(cells)
			continue
		}
		if cols == 0 || strings.HasPrefix(cells[0], "---") || len(cells) < 2 {
			continue
		}
		d := docDefault{block: block, attr: strings.Trim(strings.Fields(cells[0])[0], "`")}
		def := cells[1]
		if cols == 4 {
			def = cells[2]
			if m := flagRe.FindStringSubmatch(cells[1]); m != nil {
				d.flag = m[1]
			}
		}
		if m := flagRe.FindStringSubmatch(cells[0]); m != nil && d.flag == "" {
			d.flag = m[1] // "`parent` (`--cgroup-parent`)"
		}
		if m := literal.FindStringSubmatch(def); m != nil {
			d.literal = m[1]
		}
		out = append(out, d)
	}
	return out
}

// docs/config.md states the built-in defaults that daemon.DefaultConfig
// defines, and serve's flags show them: each literal default in its
// tables, set in a config file, must leave the defaults unchanged, and
// the flag of that row must show the same value in --help.
func TestConfigDocMatchesDefaults(t *testing.T) {
	rows := configDocDefaults(t)
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addServeFlags(fs)
	checked, flags := 0, 0
	for _, r := range rows {
		if r.literal == "" {
			continue
		}
		hcl := r.attr + " = " + r.literal + "\n"
		switch r.block {
		case "":
		case "profile":
			hcl = "profile \"default\" {\n" + hcl + "}\n"
		default:
			hcl = r.block + " {\n" + hcl + "}\n"
		}
		got, err := daemon.ParseConfig([]byte(hcl), "docs/config.md")
		if err != nil {
			t.Errorf("%s %s: the documented default %s does not parse: %v", r.block, r.attr, r.literal, err)
			continue
		}
		if want := daemon.DefaultConfig(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s %s: docs/config.md says the default is %s; the built-in default differs", r.block, r.attr, r.literal)
		}
		checked++
		if r.flag == "" {
			continue
		}
		f := fs.Lookup(strings.TrimPrefix(r.flag, "--"))
		if f == nil {
			t.Errorf("%s: docs/config.md names flag %s, which serve does not have", r.attr, r.flag)
			continue
		}
		if want := strings.Trim(r.literal, `"`); f.DefValue != want && !(f.Value.Type() == "float64" && f.DefValue+".0" == want) {
			t.Errorf("%s: --help shows the default %q, docs/config.md %q", r.flag, f.DefValue, want)
		}
		flags++
	}
	// Enough rows were read that a changed table layout cannot pass
	// silently (today: 25 literal defaults, 14 of them with a flag).
	t.Logf("%d documented defaults checked, %d of them against a flag", checked, flags)
	if checked < 25 || flags < 14 {
		t.Fatalf("only %d documented defaults (%d with flags) read from docs/config.md", checked, flags)
	}
}
