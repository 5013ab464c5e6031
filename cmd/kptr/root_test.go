package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The names kptrRootFor selects a command by are the built command's name
// and aliases, and the table lists every command of the whole tree.
func TestTopCommandsNames(t *testing.T) {
	g := newGlobals(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" })
	var inTree []string
	for _, c := range g.kptrRoot().Commands() {
		if c.Name() != "completion" && c.Name() != "help" {
			inTree = append(inTree, c.Name())
		}
	}
	var listed []string
	for _, tc := range g.topCommands() {
		c := tc.build()
		if want := append([]string{c.Name()}, c.Aliases...); !slices.Equal(tc.names, want) {
			t.Errorf("topCommands lists %q for the command named %q", tc.names, want)
		}
		listed = append(listed, c.Name())
	}
	if slices.Sort(listed); !slices.Equal(listed, inTree) { // Commands() sorts by name
		t.Errorf("topCommands %q, the whole tree %q", listed, inTree)
	}
}

// A command line prints the same and exits the same whether kptr built only
// the command it names or the whole tree: help, usage errors, suggestions,
// flag errors and runs.
func TestPrunedTreeBehavesAsTheWhole(t *testing.T) {
	t.Setenv("KPTR_PROGRESS", "none")
	t.Setenv("KPTR_CACHE_DIR", t.TempDir())
	lines := [][]string{
		{"version"}, {"version", "extra"}, {"version", "--help"}, {"version", "--bogus"},
		{"fn"}, {"fn", "--help"}, {"fn", "rendr"}, {"fn", "render", "--help"}, {"fn", "eval", "--help"},
		{"fn", "eval", t.TempDir()}, {"fn", "render", "/nonexistent/pkg"},
		{"render", "--help"}, {"render", "--image-pull-policy", "Sometimes", t.TempDir()},
		{"cache"}, {"cache", "lss"}, {"cache", "ls"}, {"cache", "prune", "--help"},
		{"prewarm", "--help"}, {"generate", "--help"}, {"parameters", "--help"},
		{"doctor", "--help"}, {"init"}, {"init", "--help"}, {"docker", "--help"},
		{"install-docker", "--help"}, {"install-docker"},
		// the whole tree either way
		{"help"}, {"help", "cache", "ls"}, {"vresion"}, {"--version"}, {},
	}
	for _, args := range lines {
		argv := append([]string{"kptr"}, args...)
		wholeTree = true
		wantCode, wantOut, wantErr := runIn(t, argv...)
		wholeTree = false
		code, out, errs := runIn(t, argv...)
		if code != wantCode || out != wantOut || errs != wantErr {
			t.Errorf("%q built alone: exit %d\n%s%s\nthe whole tree: exit %d\n%s%s", args, code, out, errs, wantCode, wantOut, wantErr)
		}
	}
}

// kptr version builds only its own command.
func TestVersionBuildsOnlyItsCommand(t *testing.T) {
	g := newGlobals(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" })
	var names []string
	for _, c := range g.kptrRootFor([]string{"version"}).Commands() {
		names = append(names, c.Name())
	}
	if !slices.Equal(names, []string{"version"}) {
		t.Errorf("kptr version built %q", names)
	}
}
