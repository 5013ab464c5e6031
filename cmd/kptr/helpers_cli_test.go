package main

import (
	"context"

	"github.com/spf13/pflag"
)

// execIn runs one kptr command line (without the program name) with g, as run
// does, and returns the command's error unprinted.
func execIn(ctx context.Context, g *globals, args ...string) error {
	_, err := g.execute(ctx, args)
	return err
}

// generateFlags is generate's flag set: the shared settings it uses and the
// operator policy's flags, bound to g and p.
func generateFlags(g *globals, p *policy) *pflag.FlagSet {
	fs := pflag.NewFlagSet("generate", pflag.ContinueOnError)
	g.addSettings(fs, fnScopes, false)
	policyFlags(fs, g.getenv, p)
	return fs
}

// parseFlags parses args into fs and checks the settings, as a command does
// before it runs.
func parseFlags(g *globals, fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return g.checkSettings(fs)
}
