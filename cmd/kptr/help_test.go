package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command, groups included, answers --help on stdout with exit 0: its
// paragraph, its usage and examples; the global flags it lists are only those
// that apply to it (version and fn source have none, cache ls no registry
// flag). `kptr cache --help` and `kptr fn --help` used to print the top-level
// help and fail with `unknown command "cache --help"`.
func TestHelpAtEveryLevel(t *testing.T) {
	g := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" })
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || (c.HasParent() && c.Parent().Name() == "completion") {
			return
		}
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(g.kptrRoot())
	if len(paths) < 18 {
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	for _, p := range paths {
		code, out, errs := runIn(t, append(append([]string{"kptr"}, p...), "--help")...)
		name := strings.Join(append([]string{"kptr"}, p...), " ")
		if code != 0 || errs != "" || !strings.Contains(out, "\nUsage:\n  "+name) || !strings.Contains(out, "\nExamples:\n") || strings.Index(out, "\n\n") < 40 {
			t.Errorf("%s --help: exit %d, stderr %q, stdout:\n%s", name, code, errs, out)
		}
	}
	for args, want := range map[string][]string{
		"version --help":   nil,
		"fn source --help": nil,
		"doctor --help":    nil,
		"cache ls --help":  {"--cache-dir", "--log-level"},
		"fn render --help": {"--cache-dir", "--mirror", "--offline", "--fn-timeout", "--sandbox", "--image-prefix"},
	} {
		_, out, _ := runIn(t, append([]string{"kptr"}, strings.Fields(args)...)...)
		_, global, _ := strings.Cut(out, "\nGlobal flags")
		if (want == nil) != (global == "") {
			t.Errorf("%s: global flags section %q", args, global)
		}
		for _, f := range want {
			if !strings.Contains(global, f+" ") {
				t.Errorf("%s: %s not listed among %q", args, f, global)
			}
		}
		if strings.HasPrefix(args, "cache ls") && strings.Contains(global, "--mirror") {
			t.Errorf("cache ls lists --mirror, which does not apply to it")
		}
	}
}

// kptr --help lists every exit code run can return as kptr: the signature
// policy's refusal (4) was missing from it, and so were the interruptions.
func TestHelpListsEveryExitCode(t *testing.T) {
	code, out, _ := runIn(t, "kptr", "--help")
	if code != 0 {
		t.Fatalf("kptr --help: exit %d", code)
	}
	for _, want := range []string{"0 ok", "1 a function", "2 usage", "3 environment", fmt.Sprintf("%d an image refused by the signature", exitSignature), "130 and 143 interrupted"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("kptr --help does not say %q:\n%s", want, out)
		}
	}
}

// Invoked as kpt, the help of --allow-alpha-wasm says what the flag does:
// it said wasm functions were not supported and the flag an error, long
// after the wasm tier ran them under it.
func TestKptHelpWasmFlag(t *testing.T) {
	for _, cmd := range []string{"render", "eval"} {
		_, out, _ := runIn(t, "kpt", "fn", cmd, "--help")
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "--allow-alpha-wasm") {
				line = l
			}
		}
		if line == "" || strings.Contains(line, "not supported") || !strings.Contains(line, "run wasm function images") {
			t.Errorf("kpt fn %s --help: --allow-alpha-wasm line %q", cmd, line)
		}
	}
}
