package envscrub

import (
	"path/filepath"
	"strings"
)

// filterPythonPath drops empty entries (an empty entry silently puts the
// working directory on sys.path) and entries inside the pool's install.
func (s *Scrubber) filterPythonPath(value string) string {
	sep := ":"
	if s.windows {
		sep = ";"
	}
	var out []string
	for _, e := range strings.Split(value, sep) {
		if e == "" || s.insideInstall(e) {
			continue
		}
		out = append(out, e)
	}
	return strings.Join(out, sep)
}

func (s *Scrubber) insideInstall(entry string) bool {
	clean := filepath.Clean(entry)
	for _, dir := range s.install {
		d := filepath.Clean(dir)
		if d == "." || d == "" {
			continue
		}
		if s.windows {
			clean, d = strings.ToLower(clean), strings.ToLower(d)
		}
		if clean == d || strings.HasPrefix(clean, strings.TrimSuffix(d, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
		if s.windows && strings.HasPrefix(clean, strings.TrimSuffix(d, `\`)+`\`) {
			return true
		}
	}
	return false
}
