package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/pipeline"
)

func (g *globals) sourceCmd() *cobra.Command {
	var fnConfig, output string
	c := g.command(&cobra.Command{
		Use:   "source [DIR]",
		Short: "Print a package's resources as a ResourceList, as kpt fn source does",
		Long: `Read the resources of DIR (default: the current directory) and print them on
stdout as a ResourceList (or, with -o unwrap, as a plain YAML stream), with
kpt's path and index annotations, for a pipe into kptr fn eval - and kptr fn
sink. Runs no function and needs no cache or sandbox.`,
		Example: `  kptr fn source my-package
  kptr fn source my-package | kptr fn eval - -i set-labels:v0.2.0 -- app=web | kptr fn sink out`,
	}, 0, func(_ context.Context, _ *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageError("expected at most one directory")
		}
		if output != "" && output != "unwrap" && output != "stdout" {
			return usageError("--output must be stdout or unwrap")
		}
		dir := "."
		if len(args) == 1 {
			dir = args[0]
		}
		if err := pipeline.Source(dir, fnConfig, output == "unwrap", g.stdout); err != nil {
			return g.inputFailure(g.packageError("fn source", dir, err))
		}
		return nil
	})
	c.Flags().StringVar(&fnConfig, "fn-config", "", "file holding the functionConfig to add")
	c.Flags().StringVarP(&output, "output", "o", "", "unwrap: plain YAML instead of a ResourceList")
	return c
}

func (g *globals) sinkCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "sink [DIR]",
		Short: "Write a ResourceList from stdin into a new directory, as kpt fn sink does",
		Long: `Read a ResourceList (or a YAML stream) from stdin and write its resources into
DIR (default: the current directory), each into the file its path annotation
names. The directory must not exist yet. Runs no function and needs no cache
or sandbox.`,
		Example: `  kptr fn source my-package | kptr fn eval - -i set-labels:v0.2.0 -- app=web | kptr fn sink out`,
	}, 0, func(_ context.Context, _ *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageError("expected at most one directory")
		}
		dir := "."
		if len(args) == 1 {
			dir = args[0]
		}
		if err := pipeline.Sink(g.stdin, dir); err != nil {
			return g.inputFailure(err)
		}
		return nil
	})
}
