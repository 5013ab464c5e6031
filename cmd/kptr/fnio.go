package main

import (
	"context"

	"github.com/kptr-dev/kptr/pipeline"
)

func init() {
	register(&command{name: "fn source", summary: "print a package as a ResourceList (`kpt fn source`)", run: runFnSource})
	register(&command{name: "fn sink", summary: "write a ResourceList from stdin into a directory (`kpt fn sink`)", run: runFnSink})
}

func runFnSource(_ context.Context, g *globals, args []string) error {
	fs := g.flagSet("fn source", "[DIR] [--fn-config FILE] [-o unwrap]")
	var fnConfig, output string
	fs.StringVar(&fnConfig, "fn-config", "", "file holding the functionConfig to add")
	fs.StringVarP(&output, "output", "o", "", "unwrap: plain YAML instead of a ResourceList")
	if err := g.parse(fs, args); err != nil {
		return g.usage(err)
	}
	if fs.NArg() > 1 {
		return g.usage(usageError("expected at most one directory"))
	}
	if output != "" && output != "unwrap" && output != "stdout" {
		return g.usage(usageError("--output must be stdout or unwrap"))
	}
	dir := "."
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if err := pipeline.Source(dir, fnConfig, output == "unwrap", g.stdout); err != nil {
		return g.kptFailure(err)
	}
	return nil
}

func runFnSink(_ context.Context, g *globals, args []string) error {
	fs := g.flagSet("fn sink", "[DIR]")
	if err := g.parse(fs, args); err != nil {
		return g.usage(err)
	}
	if fs.NArg() > 1 {
		return g.usage(usageError("expected at most one directory"))
	}
	dir := "."
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if err := pipeline.Sink(g.stdin, dir); err != nil {
		return g.kptFailure(err)
	}
	return nil
}
