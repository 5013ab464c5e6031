package main

import (
	"fmt"
	"os"
)

// prepareResultsDir creates --results-dir before anything runs, as kpt's
// fn render and fn eval do in their pre-run step, so that an unusable
// directory fails the command with the package untouched (it used to be
// discovered after an in-place render had already rewritten the package).
// An existing -o destination directory is reported first, as in kpt.
func prepareResultsDir(resultsDir, output string) error {
	if resultsDir == "" {
		return nil
	}
	if output != "" && output != "stdout" && output != "unwrap" {
		if _, err := os.Stat(output); err == nil {
			return nil
		}
	}
	if err := os.MkdirAll(resultsDir, 0o755); err != nil {
		return fmt.Errorf("cannot read or create results dir %q: %w", resultsDir, err)
	}
	return nil
}
