package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionInfo is what `kernpool version` prints and /v1/health reports.
type versionInfo struct {
	// Version is the module version ("v1.2.3", or "(devel)" from a checkout),
	// unless the linker set main.version.
	Version string
	// Revision is the VCS revision the binary was built from ("unknown"
	// when the build recorded none); Modified marks uncommitted changes.
	Revision string
	Modified bool
	// GoVersion is the toolchain.
	GoVersion string
}

// buildVersion reads the version from the build info (runtime/debug):
// `go install ...@v1.2.3` records the module version, a build in a git
// checkout the revision.
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if version == devVersion && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: "v1.2.3 (revision abc123, modified, go1.26)".
func (v versionInfo) String() string {
	rev := v.Revision
	if v.Modified {
		rev += ", modified"
	}
	return fmt.Sprintf("%s (revision %s, %s)", v.Version, rev, v.GoVersion)
}
