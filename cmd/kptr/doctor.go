package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/kptr-dev/kptr/runtime"
)

func init() {
	register(&command{
		name:    "doctor",
		summary: "check what the function sandbox needs here, and how to fix what is missing",
		run:     runDoctor,
	})
}

// runDoctor probes every sandbox prerequisite in the current environment and
// prints one line per probe, with the pod securityContext or node setting
// that fixes each failed or degraded one. Exit 3 when the sandbox cannot run.
func runDoctor(_ context.Context, g *globals, args []string) error {
	fs := g.flagSet("doctor", "")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("doctor takes no arguments")
	}
	results, feat := runtime.Probe()
	w := g.stdout
	for _, r := range results {
		fmt.Fprintf(w, "%-11s %-9s %s\n", "["+string(r.Status)+"]", r.Name, r.Detail)
		if r.Status != runtime.StatusOK && r.Fix != "" {
			fmt.Fprintf(w, "%-21s fix: %s\n", "", r.Fix)
		}
	}
	if err := runtime.Required(results); err != nil {
		fmt.Fprintf(w, "\nsandbox: UNAVAILABLE (%v)\n", err)
		fmt.Fprintln(w, "kptr refuses to run function images here unless --sandbox=none (KPTR_SANDBOX=none) is set.")
		return withCode(exitEnv, errReportedf("sandbox unavailable"))
	}
	who := fmt.Sprintf("uid %d", feat.UID)
	if feat.Root {
		who = "root (functions still never hold host root)"
	}
	var degraded []string
	for _, r := range results {
		if r.Status == runtime.StatusDegraded {
			degraded = append(degraded, r.Name)
		}
	}
	fmt.Fprintf(w, "\nsandbox: usable as %s", who)
	if len(degraded) > 0 {
		fmt.Fprintf(w, "; degraded: %s", strings.Join(degraded, ", "))
	}
	fmt.Fprintln(w)
	return nil
}

// errReportedf is an error main does not print again (doctor printed it).
func errReportedf(msg string) error { return fmt.Errorf("%s: %w", msg, errReported) }
