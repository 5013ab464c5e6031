package main

import (
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// enumSettings are the string settings that take a fixed list of words.
var enumSettings = []string{"KPTR_SANDBOX", "KPTR_MEMO", "KPTR_PROGRESS", "KPTR_LOG_LEVEL", "KPTR_IMAGE_PULL_POLICY"}

// Every boolean, duration, number and enumerated setting of every command,
// flag-backed or not, refuses a value it does not document with one line
// naming the variable and exit 2, before anything runs (issue 32: the
// KPTR_ALLOW_* variables read "yes" and "maybe" as false without a word).
// The list is read off the command trees (kptr's and kpt's), so a setting
// added later is tested too.
func TestEverySettingRefusesNonsense(t *testing.T) {
	t.Setenv("KPTR_PROGRESS", "none")
	dir := t.TempDir()
	type setting struct {
		cmd []string
		env string
	}
	var all []setting
	seen := map[string]bool{}
	for _, kpt := range []bool{false, true} {
		root := wholeRoot(kpt)
		walkCommands(root, func(c *cobra.Command) {
			if !c.Runnable() || c.Name() == "help" || strings.HasPrefix(c.CommandPath(), root.Name()+" completion") {
				return
			}
			path := strings.Fields(c.CommandPath())
			path[0] = map[bool]string{false: "kptr", true: "kpt"}[kpt]
			c.Flags().VisitAll(func(f *pflag.Flag) {
				env := envInUsage(f.Usage)
				if _, unused := f.Annotations[unusedFlag]; env == "" || unused {
					return
				}
				switch f.Value.Type() {
				case "bool", "duration", "int", "int64":
				default:
					if !slices.Contains(enumSettings, env) {
						return
					}
				}
				all = append(all, setting{path, env})
				seen[env] = true
			})
			var envOnly []string
			if applies(c.Flags(), "fn-timeout") {
				envOnly = slices.Concat([]string{"KPTR_FN_MAX_OUTPUT"}, outputLimitVars, resultBudgetVars, packageLimitVars)
			}
			if applies(c.Flags(), "sandbox") {
				envOnly = append(envOnly, envOnlyBools...)
			}
			for _, v := range envOnly {
				all = append(all, setting{path, v})
				seen[v] = true
			}
		})
	}
	for _, v := range []string{"KPTR_ALLOW_EXEC", "KPTR_ALLOW_NETWORK", "KPTR_ALLOW_WASM", "KPTR_ALLOW_EMPTY", "KPTR_OFFLINE", "KPTR_OVERLAY", "KPTR_PREPARE", "KPTR_FN_TIMEOUT", "KPTR_SANDBOX", "KPTR_MEMO"} {
		if !seen[v] {
			t.Errorf("%s is not among the settings read off the command trees", v)
		}
	}
	for _, s := range all {
		for _, bad := range []string{"maybe", "yes"} {
			t.Run(strings.Join(s.cmd[1:], "_")+"/"+s.env+"="+bad, func(t *testing.T) {
				t.Setenv(s.env, bad)
				want := 2
				if s.cmd[0] == "kpt" {
					want = 1 // kpt's face exits as kpt does: 1 for every error
				}
				refused := func(args ...string) bool {
					code, stdout, stderr := runIn(t, args...)
					return code == want && strings.Contains(stderr, s.env) && !strings.Contains(strings.TrimSpace(stderr), "\n") && stdout == ""
				}
				// with a directory argument, or (a command that takes
				// none) without
				if !refused(append(slices.Clone(s.cmd), dir)...) && !refused(s.cmd...) {
					code, stdout, stderr := runIn(t, s.cmd...)
					t.Errorf("%s with %s=%s: exit %d, stdout %q, stderr %q; want exit %d and one line naming %s", strings.Join(s.cmd, " "), s.env, bad, code, stdout, stderr, want, s.env)
				}
			})
		}
	}
	if len(all) < 40 {
		t.Errorf("only %d command settings found", len(all))
	}
}

// walkCommands calls f for c and every command below it.
func walkCommands(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, f)
	}
}

// parseBool takes the documented words only, for flags as for variables.
func TestParseBool(t *testing.T) {
	for in, want := range map[string]bool{"true": true, "TRUE": true, " 1 ": true, "false": false, "False": false, "0": false} {
		if got, err := parseBool(in); err != nil || got != want {
			t.Errorf("parseBool(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yes", "no", "on", "off", "t", "f", "2", "", "maybe"} {
		if _, err := parseBool(in); err == nil {
			t.Errorf("parseBool(%q) took it", in)
		}
	}
	code, _, stderr := runIn(t, "kptr", "fn", "render", "--allow-exec=T", t.TempDir())
	if code != 2 || !strings.Contains(stderr, `want true or false (or 1, 0), got "T"`) {
		t.Errorf("--allow-exec=T: exit %d, %q", code, stderr)
	}
}

// The shell completes the values of the enumerated settings (issue 32:
// --image-pull-policy and --sandbox offered file names).
func TestCompletionOffersSettingValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"kptr", "__complete", "fn", "render", "--sandbox", ""}, "auto namespace landlock wasm none"},
		{[]string{"kptr", "__complete", "fn", "eval", "--image-pull-policy", ""}, "Always IfNotPresent Never"},
		{[]string{"kptr", "__complete", "generate", "--memo", ""}, "on off"},
		{[]string{"kptr", "__complete", "prewarm", "--progress", ""}, "auto plain none"},
		{[]string{"kptr", "__complete", "cache", "pull", "--log-level", ""}, "debug info warn error"},
	} {
		code, stdout, _ := runIn(t, tc.args...)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != 0 || len(lines) < 2 || strings.Join(lines[:len(lines)-1], " ") != tc.want || lines[len(lines)-1] != ":4" {
			t.Errorf("%v: exit %d, %q; want %q and no file completion (:4)", tc.args[2:], code, stdout, tc.want)
		}
	}
}

// envInUsage finds what the regular expression \b(KPTR?_[A-Z0-9_]+)\b finds
// first, on every flag's usage of both trees and on edge cases.
func TestEnvInUsage(t *testing.T) {
	re := regexp.MustCompile(`\b(KPTR?_[A-Z0-9_]+)\b`)
	usages := []string{"", "KPTR_", "KPT_", "KPTR_X", "(KPTR_FN_TIMEOUT)", "x (KPTR_MIRRORS, comma-separated)",
		"KPTR_Lower KPTR_UP", "aKPTR_X KPT_Y", "KPTRX_Y KPT_Z9_", "(KPT_IMAGE_PREFIX)", "KPTR__", "é KPTR_É KPTR_E"}
	for _, kpt := range []bool{false, true} {
		root := wholeRoot(kpt)
		walkCommands(root, func(c *cobra.Command) {
			c.Flags().VisitAll(func(f *pflag.Flag) { usages = append(usages, f.Usage) })
		})
	}
	for _, u := range usages {
		want := ""
		if m := re.FindStringSubmatch(u); m != nil {
			want = m[1]
		}
		if got := envInUsage(u); got != want {
			t.Errorf("envInUsage(%q) = %q, want %q", u, got, want)
		}
	}
}

// wholeRoot is kptr's whole command tree, or kpt's (as the kpt symlink).
func wholeRoot(kpt bool) *cobra.Command {
	g := newGlobals(strings.NewReader(""), io.Discard, io.Discard, func(string) string { return "" })
	g.kpt = kpt
	if kpt {
		return g.kptRoot()
	}
	return g.kptrRoot()
}
