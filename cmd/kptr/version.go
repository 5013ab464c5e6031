package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"runtime/debug"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	register(&command{name: "version", summary: "print kptr's version", run: runVersion})
}

func runVersion(_ context.Context, g *globals, args []string) error {
	fs := g.flagSet("version", "")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	fmt.Fprintf(g.stdout, "kptr %s%s %s %s/%s\n", version, rev, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
	return nil
}
