package main

import "path/filepath"

// invokedAsKpt reports whether the binary was called through a "kpt" symlink.
func invokedAsKpt(argv0 string) bool { return filepath.Base(argv0) == "kpt" }

// kptArgs translates kpt's command line into kptr's (owned by pipeline/ CLI).
func kptArgs(args []string) ([]string, error) { return args, nil }
