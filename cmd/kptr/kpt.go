package main

import (
	"fmt"
	"path/filepath"
)

// kptMode is set when the binary runs as "kpt": errors follow kpt's format
// and exit codes (every failure exits 1 with "Error: <msg> ").
var kptMode bool

// invokedAsKpt reports whether the binary was called through a "kpt" symlink
// (main calls it once per run, so it also resets kptMode).
func invokedAsKpt(argv0 string) bool {
	kptMode = filepath.Base(argv0) == "kpt"
	return kptMode
}

// kptArgs translates kpt's command line into kptr's. kpt's `fn render`,
// `fn eval`, `fn source` and `fn sink` map to the kptr commands of the same
// name; every other kpt command is refused with exit 1.
func kptArgs(args []string) ([]string, error) {
	kptMode = true
	if len(args) == 0 {
		return nil, fmt.Errorf("kptr implements only `kpt fn render|eval|source|sink`")
	}
	switch args[0] {
	case "version", "--version":
		return []string{"version"}, nil
	case "help", "-h", "--help":
		return args, nil
	case "fn":
		if len(args) >= 2 {
			switch args[1] {
			case "render", "eval", "source", "sink":
				return args, nil
			}
		}
	}
	cmd := args[0]
	if cmd == "fn" && len(args) == 1 {
		return nil, fmt.Errorf("`kpt fn` needs a subcommand: kptr implements kpt fn render, eval, source and sink")
	}
	if cmd == "fn" {
		cmd += " " + args[1]
	}
	return nil, fmt.Errorf("`kpt %s` is not supported by kptr (it implements kpt fn render, eval, source and sink)", cmd)
}
