package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

func (g *globals) versionCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "version",
		Short: "Print kptr's version",
		Long: `Print kptr's version, the commit it was built from, the Go release and the
platform, on one line. Invoked as kpt, "kpt version" prints the kpt release
kptr follows, in kpt's format, then this line.`,
		Example: `  kptr version
  kptr --version`,
		Args: noArgs,
	}, 0, func(context.Context, *cobra.Command, []string) error { return g.printVersion() })
}

// printVersion prints kptr's version line.
func (g *globals) printVersion() error {
	_, err := fmt.Fprintln(g.stdout, versionLine())
	return err
}

// versionLine is "kptr VERSION [REVISION] GO OS/ARCH".
func versionLine() string {
	bi, _ := debug.ReadBuildInfo()
	v, rev := versionOf(version, bi)
	if rev != "" {
		rev = " " + rev
	}
	return fmt.Sprintf("kptr %s%s %s %s/%s", v, rev, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
}

// versionOf is the version to print and the commit, if the build recorded
// one. The Makefile's version (git describe) wins; a binary built by `go
// install github.com/kptr-dev/kptr/cmd/kptr@VERSION` has none, and names the
// module version it was built from instead (a tag, or a pseudo-version
// naming the commit), which is what `kptr version` reports then.
func versionOf(ldflagsVersion string, bi *debug.BuildInfo) (v, revision string) {
	v = ldflagsVersion
	if bi == nil {
		return v, ""
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	return v, revision
}
