package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFormat(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}}
	devel := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	for _, tc := range []struct {
		version, commit string
		bi              *debug.BuildInfo
		want            string
	}{
		{"v9", "def", vcs, "sless v9 (commit def, modified, "},
		{"", "", vcs, "sless v1.2.3 (commit abc, modified, "},
		{"", "", devel, "sless (devel) (commit unknown, "},
		{"", "", nil, "sless (devel) (commit unknown, "},
	} {
		if got, want := format("sless", tc.version, tc.commit, tc.bi), tc.want+runtime.Version()+")"; got != want {
			t.Errorf("format(%q, %q) = %q, want %q", tc.version, tc.commit, got, want)
		}
	}
	if Short("") != "devel" || Short("v1") != "v1" {
		t.Errorf("Short: %q %q", Short(""), Short("v1"))
	}
}
