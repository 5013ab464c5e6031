package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Invoked as kpt (a "kpt" symlink to kptr), kptr takes kpt's command line for
// the commands it implements, kpt fn render, eval, source and sink: kpt's
// flags and usage lines with help in kptr's own words (kptdocs.go), kpt's
// error lines and exit codes (every failure exits 1). kpt version prints the kpt release kptr follows; every other kpt
// command (pkg, live, alpha, fn doc) is refused, naming the real kpt.

// kptRelease is the kpt release whose fn commands kptr follows (README).
const kptRelease = "1.0.0-beta.67"

// invokedAsKpt reports whether the binary was called through a "kpt" name.
func invokedAsKpt(argv0 string) bool { return filepath.Base(argv0) == "kpt" }

// kptRoot builds kpt's command tree around g.
func (g *globals) kptRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "kpt",
		Short: "Kpt Packaging Tool",
		Long:  kptDocs["kpt"].long,
		// Args unset: cobra's own check of the root, as in kpt, refuses an
		// unknown command before any flag (`kpt frob --help` exits 1).
		// kpt alone shows its help and exits 0, as kpt does.
		Run:           func(c *cobra.Command, _ []string) { c.SetOut(c.ErrOrStderr()); _ = c.Help() },
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(g.flagError)
	fn := &cobra.Command{
		Use:     "fn",
		Aliases: []string{"functions"},
		Args:    unknownCommand,
		Run:     func(c *cobra.Command, _ []string) { c.SetOut(c.ErrOrStderr()); _ = c.Help() },
	}
	fn.AddCommand(g.renderCmd("render", ""), g.evalCmd(), g.sourceCmd(), g.sinkCmd(),
		kptUnsupported("doc", "Show a function's documentation"))
	root.AddCommand(fn,
		&cobra.Command{
			Use:   "version",
			Short: "Print the kpt release kptr follows, then kptr's version",
			Args:  noArgs,
			RunE: func(*cobra.Command, []string) error {
				_, err := fmt.Fprintf(g.stdout, "%s\n%s\n", kptRelease, versionLine())
				return err
			},
		},
		kptUnsupported("pkg", "Fetch, update and inspect packages"),
		kptUnsupported("live", "Apply packages to a cluster"),
		kptUnsupported("alpha", "Experimental kpt commands"),
	)
	for _, c := range append([]*cobra.Command{root, fn}, fn.Commands()...) {
		applyKptDoc(c)
	}
	return root
}

// kptUnsupported is a kpt command kptr does not implement: listed in the
// help as kpt lists it, and refused whatever follows it.
func kptUnsupported(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short + " (not supported by kptr)",
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, _ []string) error {
			path := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
			return fmt.Errorf("`kpt %s` is not supported by kptr (it implements kpt fn render, eval, source and sink); use the real kpt for it: https://kpt.dev/installation/", path)
		},
	}
}

// applyKptDoc gives c its kpt-mode help: description, examples and the
// descriptions of kpt's flags. Flags kpt does not have (kptr's own settings among them) are
// hidden from the help; they still work.
func applyKptDoc(c *cobra.Command) {
	key := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "kpt"), " ")
	if key == "" {
		key = "kpt"
	}
	d, ok := kptDocs[key]
	if !ok {
		return
	}
	c.Short, c.Long, c.Example = d.short, d.long, d.example
	if d.use != "" {
		c.Use = d.use
	}
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if u, ok := d.flags[f.Name]; ok {
			f.Usage, f.Hidden = u, false
		} else {
			f.Hidden = true
		}
	})
	c.Flags().SortFlags = true
}

// kptExit prints err as kpt would and returns kpt's exit code, 1: a command
// line cobra could not parse as kubectl's "error: <msg>" (which kpt uses for
// them), any other error as kpt's own "Error: <msg> ".
func kptExit(g *globals, err error) int {
	var pe *parseError
	switch {
	case errors.Is(err, errReported):
	case errors.As(err, &pe):
		fmt.Fprintf(g.stderr, "error: %s\n", pe.Error())
	case strings.HasPrefix(err.Error(), "unknown command "):
		// cobra's refusal of an unknown command, printed as kpt does
		fmt.Fprintf(g.stderr, "error: %s\n", err)
	default:
		fmt.Fprintf(g.stderr, "Error: %s \n", err)
	}
	return exitFunction
}
