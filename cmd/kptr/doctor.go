package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/runtime"
)

func (g *globals) doctorCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "doctor",
		Short: "Check what each function sandbox tier needs here, which one runs, and how to fix what is missing",
		Long: `Probe both sandbox tiers in the current environment: the namespace tier (user
namespaces, mounting /proc, a network namespace, overlayfs, cgroups, seccomp,
hostname, pivot_root) and the landlock tier (Landlock ABI, seccomp, no_new_privs;
as root, whether the image cache the runs use, --cache-dir / KPTR_CACHE_DIR,
is in reach of the uids functions run as).
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

// runDoctor probes both sandbox tiers in the current environment, prints
// one line per probe with the pod securityContext or node setting that fixes
// each failed or degraded one, and says which tier --sandbox (KPTR_SANDBOX)
// picks here and why not the stronger one. Exit 3 when the chosen mode
// cannot run functions.
func (g *globals) runDoctor(context.Context, *cobra.Command, []string) error {
	w := g.stdout
	// Always probed afresh; the verdicts replace the ones other kptr
	// processes reuse (runtime.ProbeCached), so doctor also refreshes them.
	nsResults, feat, _ := runtime.ProbeCached(true)
	fmt.Fprintln(w, "namespace tier (own user, mount, pid, network, ipc and uts namespaces; the image is the function's root):")
	printProbes(w, nsResults)
	llResults, _ := runtime.ProbeLandlockCached(runtime.DefaultStateDir(), true)
	if runtime.Required(llResults) == nil {
		// what the runs will meet: the image cache they use must be in
		// reach of the uids functions run as (as root)
		llResults = append(llResults, g.cacheProbe())
	}
	fmt.Fprintln(w, "\nlandlock tier (no namespaces: a child of kptr confined by Landlock, seccomp and rlimits):")
	printProbes(w, llResults)

	nsErr, llErr := runtime.Required(nsResults), runtime.Required(llResults)
	who := fmt.Sprintf("uid %d", feat.UID)
	if feat.Root {
		who = "root (functions still never hold host root)"
	}
	mode := g.sandbox
	if mode == "" {
		mode = sandboxAuto
	}
	fmt.Fprintln(w)
	switch {
	case mode == sandboxNone:
		fmt.Fprintln(w, "sandbox: none (--sandbox=none, KPTR_SANDBOX=none): functions run without a sandbox, by the operator's choice")
		return nil
	case nsErr == nil && mode != sandboxLandlock:
		fmt.Fprintf(w, "sandbox: usable as %s%s\n", who, degraded(nsResults))
		fmt.Fprintln(w, "tier: namespace")
		fmt.Fprintln(w, "launcher: "+runtime.LauncherSummary(g.cacheDir))
		return nil
	case llErr == nil && mode != sandboxNamespace:
		fmt.Fprintf(w, "sandbox: usable as %s in the landlock tier%s\n", who, degraded(llResults))
		if mode == sandboxLandlock {
			fmt.Fprintln(w, "tier: landlock (chosen by --sandbox=landlock)")
		} else {
			fmt.Fprintf(w, "tier: landlock, because the namespace tier is unavailable: %v\n", nsErr)
		}
		fmt.Fprintln(w, "note: in the landlock tier the image is not the function's root: absolute paths resolve against the host and are denied, so a function that reads its own image's files by absolute path fails")
		return nil
	}
	var why []string
	if mode != sandboxLandlock {
		why = append(why, fmt.Sprintf("namespace tier: %v", nsErr))
	}
	if mode != sandboxNamespace {
		why = append(why, fmt.Sprintf("landlock tier: %v", llErr))
	}
	fmt.Fprintf(w, "sandbox: UNAVAILABLE (%s)\n", strings.Join(why, "; "))
	fmt.Fprintln(w, "kptr refuses to run function images here unless --sandbox=none (KPTR_SANDBOX=none) is set.")
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

// cacheProbe is the landlock tier's "cache" line: the image cache the runs
// use (--cache-dir, KPTR_CACHE_DIR, the default) is within reach of the
// uids functions run as.
func (g *globals) cacheProbe() runtime.ProbeResult {
	if err := g.landlockCacheReach(); err != nil {
		detail, fix, _ := strings.Cut(err.Error(), "; fix: ")
		return runtime.ProbeResult{Name: "cache", Status: runtime.StatusFailed, Detail: detail, Fix: fix}
	}
	if g.cacheDir == "" {
		return runtime.ProbeResult{Name: "cache", Status: runtime.StatusOK, Detail: "no image cache directory set (--cache-dir, KPTR_CACHE_DIR, $XDG_CACHE_HOME or $HOME); runs that need one will ask for it"}
	}
	return runtime.ProbeResult{Name: "cache", Status: runtime.StatusOK, Detail: "images run from " + g.cacheDir + ", within reach of the uids functions run as"}
}
