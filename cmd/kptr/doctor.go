package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/runtime"
)

func (g *globals) doctorCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "doctor",
		Short: "Check what the function sandbox needs here, and how to fix what is missing",
		Long: `Probe every prerequisite of kptr's sandbox in the current environment (user
namespaces, mounting /proc, a network namespace, overlayfs, cgroups, seccomp)
and print one line per probe, with the pod securityContext or node setting
that fixes each failed or degraded one. Run it in the Argo CD sidecar, in a CI
job or on a laptop where functions refuse to start.

Exit 0 when the sandbox works (possibly degraded), 3 when it cannot run: kptr
then refuses to run function images unless --sandbox=none is set.`,
		Example: `  kptr doctor

  # as the Argo CD sidecar runs it
  kubectl -n argocd exec deploy/argocd-repo-server -c kptr -- kptr doctor`,
		Args: noArgs,
	}, 0, g.runDoctor)
}

// runDoctor probes every sandbox prerequisite in the current environment and
// prints one line per probe, with the pod securityContext or node setting
// that fixes each failed or degraded one. Exit 3 when the sandbox cannot run.
func (g *globals) runDoctor(context.Context, *cobra.Command, []string) error {
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
