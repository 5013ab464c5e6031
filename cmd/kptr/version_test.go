package main

import (
	"runtime/debug"
	"testing"
)

// A binary from `go install github.com/kptr-dev/kptr/cmd/kptr@latest` has no
// -X main.version; it reports the module version go install built instead of
// "dev", while the Makefile's version still wins when set.
func TestVersionOf(t *testing.T) {
	moduleBuild := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kptr-dev/kptr", Version: "v0.0.0-20261126233000-ad7eb7900000"}}
	workTree := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kptr-dev/kptr", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ad7eb79aaaa"}}}
	for _, c := range []struct {
		name, ld     string
		bi           *debug.BuildInfo
		wantV, wantR string
	}{
		{"go install @version", "dev", moduleBuild, "v0.0.0-20261126233000-ad7eb7900000", ""},
		{"make build", "v1.2.0-3-gad7eb79", moduleBuild, "v1.2.0-3-gad7eb79", ""},
		{"go build in the work tree", "dev", workTree, "dev", "ad7eb79aaaa"},
		{"no build info", "dev", nil, "dev", ""},
	} {
		v, rev := versionOf(c.ld, c.bi)
		if v != c.wantV || rev != c.wantR {
			t.Errorf("%s: versionOf = %q, %q; want %q, %q", c.name, v, rev, c.wantV, c.wantR)
		}
	}
}
