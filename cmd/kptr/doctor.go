package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/runtime"
)

func (g *globals) doctorCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "doctor",
		Short: "Check what each function sandbox tier needs here, which one runs, and how to fix what is missing",
		Long: `Probe every sandbox tier in the current environment: the namespace tier (user
namespaces, mounting /proc, a network namespace, overlayfs, cgroups, seccomp,
hostname, pivot_root) and the landlock tier (Landlock ABI, seccomp, no_new_privs).
Print one line per probe, with the pod securityContext or node setting that
fixes each failed or degraded one, then which tier --sandbox (KPTR_SANDBOX)
picks here and why not the stronger one. Run it in the Argo CD sidecar, in a
CI job or on a laptop where functions refuse to start.

Exit 0 when the chosen mode can run functions (possibly degraded), 3 when it
cannot: kptr then refuses to run function images unless --sandbox=none is set.`,
		Example: `  kptr doctor

  # as the Argo CD sidecar runs it
  kubectl -n argocd exec deploy/argocd-repo-server -c kptr -- kptr doctor`,
		Args: noArgs,
	}, 0, g.runDoctor)
}

// runDoctor probes every registered sandbox tier in the current environment, prints
// one line per probe with the pod securityContext or node setting that fixes
// each failed or degraded one, and says which tier --sandbox (KPTR_SANDBOX)
// picks here and why not the stronger one. Exit 3 when the chosen mode
// cannot run functions.
func (g *globals) runDoctor(context.Context, *cobra.Command, []string) error {
	w := g.stdout
	// Always probed afresh; the verdicts replace the ones other kptr
	// processes reuse (runtime's verdict cache), so doctor also refreshes
	// them.
	tiers := runtime.Tiers()
	results := make([][]runtime.ProbeResult, len(tiers))
	for i, t := range tiers {
		info := t.Info()
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s tier (%s):\n", info.Name, info.Summary)
		results[i] = t.Probe(runtime.DefaultStateDir(), true)
		printProbes(w, results[i])
	}
	who := fmt.Sprintf("uid %d", os.Geteuid())
	if runtime.CanMapRange() {
		who = "root (functions still never hold host root)"
	}
	mode := g.sandbox
	if mode == "" {
		mode = sandboxAuto
	}
	fmt.Fprintln(w)
	if mode == sandboxNone {
		fmt.Fprintln(w, "sandbox: none (--sandbox=none, KPTR_SANDBOX=none): functions run without a sandbox, by the operator's choice")
		return nil
	}
	// The tier mode picks: the named one, or auto's first that can run.
	var why []string
	for i, t := range tiers {
		info := t.Info()
		if mode != info.Name && (mode != sandboxAuto || info.Auto == 0) {
			continue
		}
		err := runtime.Required(results[i])
		if err != nil {
			why = append(why, fmt.Sprintf("%s tier: %v", info.Name, err))
			continue
		}
		where := ""
		if i > 0 {
			where = " in the " + info.Name + " tier"
		}
		fmt.Fprintf(w, "sandbox: usable as %s%s%s\n", who, where, degraded(results[i]))
		switch {
		case len(why) > 0:
			// auto passed over stronger tiers (why[0] is the first's refusal)
			_, first, _ := strings.Cut(why[0], ": ")
			fmt.Fprintf(w, "tier: %s, because the %s tier is unavailable: %s\n", info.Name, tiers[0].Info().Name, first)
		case mode == info.Name && i > 0:
			fmt.Fprintf(w, "tier: %s (chosen by --sandbox=%s)\n", info.Name, info.Name)
		default:
			fmt.Fprintf(w, "tier: %s\n", info.Name)
		}
		if r, ok := t.(runtime.Reporter); ok {
			for _, l := range r.Report(g.cacheDir) {
				fmt.Fprintln(w, l)
			}
		}
		return nil
	}
	fmt.Fprintf(w, "sandbox: UNAVAILABLE (%s)\n", strings.Join(why, "; "))
	fmt.Fprintln(w, "kptr refuses to run function images here unless --sandbox=none (KPTR_SANDBOX=none) is set; wasm function images still run (--allow-alpha-wasm).")
	return withCode(exitEnv, errReportedf("sandbox unavailable"))
}

func printProbes(w io.Writer, results []runtime.ProbeResult) {
	for _, r := range results {
		fmt.Fprintf(w, "%-11s %-9s %s\n", "["+string(r.Status)+"]", r.Name, r.Detail)
		if r.Status != runtime.StatusOK && r.Fix != "" {
			fmt.Fprintf(w, "%-21s fix: %s\n", "", r.Fix)
		}
	}
}

// degraded lists the degraded probes ("; degraded: a, b"), or "".
func degraded(results []runtime.ProbeResult) string {
	var names []string
	for _, r := range results {
		if r.Status == runtime.StatusDegraded {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; degraded: " + strings.Join(names, ", ")
}

// errReportedf is an error main does not print again (doctor printed it).
func errReportedf(msg string) error { return fmt.Errorf("%s: %w", msg, errReported) }
