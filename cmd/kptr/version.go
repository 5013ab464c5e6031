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
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	return fmt.Sprintf("kptr %s%s %s %s/%s", version, rev, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
}
