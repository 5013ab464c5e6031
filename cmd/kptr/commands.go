package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The helpers every command of the tree (root.go) is built with.

// command finishes c: adds the shared settings of the scopes it uses (all of
// them hidden as kpt), checks them before c runs, and runs run with c's
// context. cobra has parsed the flags; args are the positional arguments.
func (g *globals) command(c *cobra.Command, use scope, run func(ctx context.Context, c *cobra.Command, args []string) error) *cobra.Command {
	fs := c.Flags()
	fs.SortFlags = g.kpt // kpt's help lists flags sorted; kptr's in declaration order, own flags first
	g.addSettings(fs, use, g.kpt)
	completeSettingValues(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := g.checkSettings(c.Flags()); err != nil {
			return err
		}
		return run(c.Context(), c, args)
	}
	return c
}

// group makes c a command group: run alone it shows its help; an unknown
// subcommand is a usage error with a suggestion.
func group(c *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	c.Args = unknownCommand
	c.RunE = func(c *cobra.Command, _ []string) error { return helpAsUsageError(c) }
	c.AddCommand(subs...)
	return c
}

// helpAsUsageError prints c's help on stderr and fails with exit 2.
func helpAsUsageError(c *cobra.Command) error {
	c.SetOut(c.ErrOrStderr())
	_ = c.Help()
	return usageError("name a command (listed above)")
}

// unknownCommand refuses positional arguments to a command group, which can
// only be a mistyped subcommand, suggesting the nearest ones.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if c.Root().Name() == "kpt" {
		msg += fmt.Sprintf(" for %q", c.CommandPath()) // kpt's (cobra's) wording
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return &parseError{usageError("%s", msg)}
}

// parseError is a command line cobra or pflag could not parse: an unknown
// command or flag, a bad flag value. Invoked as kpt, it is printed the way
// kpt prints it (kubectl's "error: ..."), not as kpt's own errors.
type parseError struct{ error }

func (e *parseError) Unwrap() error { return e.error }

// flagError turns pflag's parse errors into usage errors; kptr adds the flag
// it most likely meant, kpt keeps pflag's wording alone (kpt's own).
func (g *globals) flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if !g.kpt {
		if s := suggestFlag(c.Flags(), msg); s != "" {
			msg += "; did you mean " + s + "?"
		}
		msg += fmt.Sprintf(" (see %s --help)", c.CommandPath())
	}
	return &parseError{usageError("%s", msg)}
}

// suggestFlag finds the shown flag nearest to the unknown one pflag's
// message names ("unknown flag: --cahce-dir"), within two edits or as a prefix.
func suggestFlag(fs *pflag.FlagSet, msg string) string {
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return ""
	}
	best, bestD := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && d > 2 {
			d = 2
		}
		if d < bestD {
			best, bestD = "--"+f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// usage is kptr's usage text: the command line, examples, subcommands, the
// command's own flags, then the shared settings that apply to it.
func usage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprint(w, "Usage:")
	if c.Runnable() && !c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n  %s", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n  %s [command]", c.CommandPath())
	}
	if len(c.Aliases) > 0 {
		fmt.Fprintf(w, "\n\nAliases:\n  %s", c.NameAndAliases())
	}
	if c.HasExample() {
		fmt.Fprintf(w, "\n\nExamples:\n%s", c.Example)
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprint(w, "\n\nCommands:")
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				fmt.Fprintf(w, "\n  %-*s %s", s.NamePadding(), s.Name(), s.Short)
			}
		}
	}
	if own := flagUsages(c.LocalFlags(), false); own != "" {
		fmt.Fprintf(w, "\n\nFlags:\n%s", strings.TrimRight(own, "\n"))
	}
	if shared := flagUsages(c.LocalFlags(), true); shared != "" {
		fmt.Fprintf(w, "\n\nGlobal flags (each also read from the variable named):\n%s", strings.TrimRight(shared, "\n"))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n\nRun '%s COMMAND --help' for a command's description, flags and examples.", c.CommandPath())
	}
	fmt.Fprintln(w)
	return nil
}

// noArgs refuses positional arguments, naming the command.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("takes no arguments, got %q", strings.Join(args, " "))
	}
	return nil
}
