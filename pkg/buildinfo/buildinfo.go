// Package buildinfo says which build of a sless binary is running: the
// version and commit stamped at link time, else Go's build info.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// String is "NAME VERSION (commit C[, modified], GOVERSION)": the stamped
// version and commit first, then the build info's module version and VCS
// stamps (absent with -buildvcs=false or outside a checkout).
func String(name, version, commit string) string {
	bi, _ := debug.ReadBuildInfo()
	return format(name, version, commit, bi)
}

func format(name, version, commit string, bi *debug.BuildInfo) string {
	v, c, modified := version, commit, false
	if bi != nil {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if c == "" {
					c = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	if modified {
		c += ", modified"
	}
	return fmt.Sprintf("%s %s (commit %s, %s)", name, v, c, runtime.Version())
}

// Short is the stamped version, or "devel", as a User-Agent carries it.
func Short(version string) string {
	if version != "" {
		return version
	}
	return "devel"
}
