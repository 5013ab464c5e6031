package main

import (
	"bytes"
	"strings"
	"testing"
)

// Invoked as kpt, every failure exits 1: a command line that does not parse
// as kpt prints it ("error: <msg>", kubectl's format), any other failure as
// kpt's "Error: <msg> "; as kptr, a flag error is a usage error (exit 2).
func TestKptMode(t *testing.T) {
	cases := []struct {
		argv   []string
		code   int
		stderr string
	}{
		{[]string{"/usr/local/bin/kpt", "live", "apply"}, 1, "Error: `kpt live` is not supported by kptr (it implements kpt fn render, eval, source and sink); use the real kpt for it: https://kpt.dev/installation/ \n"},
		{[]string{"/usr/local/bin/kpt", "pkg", "get", "x"}, 1, "Error: `kpt pkg` is not supported by kptr"},
		{[]string{"/usr/local/bin/kpt", "fn", "render", "--no-such-flag"}, 1, "error: unknown flag: --no-such-flag\n"},
		{[]string{"/usr/local/bin/kpt", "fn", "render", "-z"}, 1, "error: unknown shorthand flag: 'z' in -z\n"},
		{[]string{"/usr/local/bin/kpt", "fn", "render", t.TempDir()}, 1, "Error: No Kptfile found at"},
		{[]string{"kptr", "fn", "render", "--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
		{[]string{"kptr", "fn", "eval", t.TempDir()}, 2, "must specify --image or --exec"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(c.argv, strings.NewReader(""), &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.argv, code, errb.String(), c.code, c.stderr)
		}
	}
}
