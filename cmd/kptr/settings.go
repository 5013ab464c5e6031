package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// One reading of a boolean setting for kptr's flags and variables alike: true
// or 1, false or 0 (true and false in any case), surrounding blanks ignored.
// Anything else (yes, on, maybe, t) is refused where it is read: a flag as a
// usage error by pflag, a variable by checkSettings, before anything runs.
// A silent false for KPTR_ALLOW_EXEC=yes would leave an operator believing
// they had allowed (or, worse, denied) something.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("want true or false (or 1, 0), got %q", s)
}

// envBool is a boolean variable's value as a flag's default; checkSettings
// refuses the values parseBool does not take before the command runs.
func envBool(v string) bool {
	b, _ := parseBool(v)
	return b
}

// strictBool makes a bool flag take parseBool's words only (pflag's own
// reading also takes t, T, TRUE, F, …).
type strictBool struct{ pflag.Value }

func (b strictBool) Set(s string) error {
	v, err := parseBool(s)
	if err != nil {
		return err
	}
	return b.Value.Set(strconv.FormatBool(v))
}

// strictBools gives every bool flag of the tree under root parseBool's
// reading; run once the tree is built, so no command's flag is missed.
func strictBools(root *cobra.Command) {
	visit := func(fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) {
			if _, done := f.Value.(strictBool); !done && f.Value.Type() == "bool" {
				f.Value = strictBool{f.Value}
			}
		})
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit(c.Flags())
		visit(c.PersistentFlags())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// envOnlyBools are the boolean settings with no flag, read by the commands
// that run functions (checkSettings refuses a value parseBool does not take).
var envOnlyBools = []string{
	"KPTR_OVERLAY", // false: the image read-only even where an overlay works
	"KPTR_PREPARE", // false: every sandbox starts cold
}

// --memo / KPTR_MEMO values.
const (
	memoOn  = "on"
	memoOff = "off"
)

// settingValues are the words of the enumerated settings, for shell
// completion (checkSettings holds a value to the same lists).
func settingValues() map[string][]string {
	return map[string][]string{
		"image-pull-policy": {string(cache.PullAlways), string(cache.PullIfNotPresent), string(cache.PullNever)},
		"sandbox":           fnenv.SandboxWords(),
		"memo":              {memoOn, memoOff},
		"progress":          {"auto", "plain", "none"},
		"log-level":         {"debug", "info", "warn", "error"},
	}
}

// completeSettingValues lets the shell complete the values of c's
// enumerated settings (kptr fn render --sandbox <TAB>). The words are
// looked up when a completion asks, not as every command line builds its
// tree.
func completeSettingValues(c *cobra.Command) {
	for _, name := range []string{"image-pull-policy", "sandbox", "memo", "progress", "log-level"} {
		if c.Flags().Lookup(name) == nil {
			continue
		}
		_ = c.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return settingValues()[name], cobra.ShellCompDirectiveNoFileComp
		})
	}
}
