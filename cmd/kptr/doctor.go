package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/signature"
)

func (g *globals) doctorCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "doctor",
		Short: "Check what each function sandbox tier needs here, which one runs, and how to fix what is missing",
		Long: `Probe both sandbox tiers in the current environment: the namespace tier (user
namespaces, mounting /proc, a network namespace, overlayfs, cgroups, seccomp,
hostname, pivot_root) and the landlock tier (Landlock ABI, seccomp, no_new_privs).
Print one line per probe, with the pod securityContext or node setting that
fixes each failed or degraded one, then which tier --sandbox (KPTR_SANDBOX)
picks here and why not the stronger one. Last, the signature policy in force
(KPTR_SIGNATURE_POLICY): its file, hash and scopes, or that there is none. Run
it in the Argo CD sidecar, in a CI job or on a laptop where functions refuse
to start.

Exit 0 when the chosen mode can run functions (possibly degraded), 2 when
the signature policy does not load, 3 when the sandbox cannot run functions: kptr then refuses to run function images unless --sandbox=none is set.`,
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
func (g *globals) runDoctor(ctx context.Context, c *cobra.Command, args []string) error {
	err := g.doctorSandbox()
	if perr := g.doctorPolicy(); err == nil {
		err = perr
	}
	return err
}

// doctorPolicy prints the signature policy in force (KPTR_SIGNATURE_POLICY
// or --signature-policy): its file, hash and scopes; an unusable one is a
// usage error (every render would refuse to start).
func (g *globals) doctorPolicy() error {
	w := g.stdout
	path := strings.TrimSpace(g.sigPolicyPath)
	if path == "" {
		fmt.Fprintln(w, "signature policy: none (KPTR_SIGNATURE_POLICY unset): every image may run")
		return nil
	}
	p, err := signature.Load(path)
	if err != nil {
		fmt.Fprintf(w, "signature policy: UNUSABLE: %v\n", err)
		return withCode(exitUsage, errReportedf("signature policy unusable"))
	}
	fmt.Fprintf(w, "signature policy: %s (sha256 %.12s); images are verified before they are pulled or run:\n", path, p.Hash)
	for _, l := range p.Describe() {
		fmt.Fprintln(w, "  "+l)
	}
	return nil
}

// doctorSandbox is the sandbox part of doctor.
func (g *globals) doctorSandbox() error {
	w := g.stdout
	// Always probed afresh; the verdicts replace the ones other kptr
	// processes reuse (runtime.ProbeCached), so doctor also refreshes them.
	nsResults, feat, _ := runtime.ProbeCached(true)
	fmt.Fprintln(w, "namespace tier (own user, mount, pid, network, ipc and uts namespaces; the image is the function's root):")
	printProbes(w, nsResults)
	llResults, _ := runtime.ProbeLandlockCached(runtime.DefaultStateDir(), true)
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
