package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/signature"
)

func (g *globals) doctorCmd() *cobra.Command {
	return g.command(&cobra.Command{
		Use:   "doctor",
		Short: "Check what each function sandbox tier needs here, which one runs, and how to fix what is missing",
		Long: `Probe every sandbox tier in the current environment: the namespace tier (user
namespaces, mounting /proc, a network namespace, overlayfs, cgroups, seccomp,
hostname, pivot_root) and the landlock tier (Landlock ABI, seccomp, no_new_privs;
as root, whether the image cache the runs use, --cache-dir / KPTR_CACHE_DIR,
is in reach of the uids functions run as).
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

// runDoctor probes every registered sandbox tier in the current environment, prints
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
	if !p.ChecksSignatures() {
		return nil
	}
	v, err := signature.VerifierPath()
	if err != nil {
		fmt.Fprintf(w, "signature verifier: MISSING: %v\n", err)
		return withCode(exitEnv, errReportedf("signature verifier missing"))
	}
	fmt.Fprintf(w, "signature verifier: %s (run only to check a signature)\n", v)
	return nil
}

// doctorSandbox is the sandbox part of doctor.
func (g *globals) doctorSandbox() error {
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
		if c, ok := t.(runtime.ImageDirChecker); ok && runtime.Required(results[i]) == nil {
			// what the runs will meet: the image cache they use (runtime.Open
			// refuses the tier alike)
			results[i] = append(results[i], g.cacheProbe(c))
		}
		printProbes(w, results[i])
	}
	who := fmt.Sprintf("uid %d", os.Geteuid())
	if runtime.CanMapRange() {
		who = "root (functions still never hold host root)"
	}
	choice, err := fnenv.Choose(g.sandbox, tiers, results)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	if choice.None {
		fmt.Fprintln(w, "sandbox: none (--sandbox=none, KPTR_SANDBOX=none): functions run without a sandbox, by the operator's choice")
		return nil
	}
	why := choice.Passed
	if i := choice.Tier; i >= 0 {
		t, info := tiers[i], tiers[i].Info()
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
		case g.sandbox == info.Name && i > 0:
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

// cacheProbe is a tier's "cache" line: the image cache the runs use
// (--cache-dir, KPTR_CACHE_DIR, the default) is within reach of the uids
// functions run as.
func (g *globals) cacheProbe(c runtime.ImageDirChecker) runtime.ProbeResult {
	if g.cacheDir == "" {
		return runtime.ProbeResult{Name: "cache", Status: runtime.StatusOK, Detail: "no image cache directory set (--cache-dir, KPTR_CACHE_DIR, $XDG_CACHE_HOME or $HOME); runs that need one will ask for it"}
	}
	return c.CheckImageDir(g.cacheDir)
}
