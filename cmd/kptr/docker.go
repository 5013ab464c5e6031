package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"text/template"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/cmd/kptr/internal/dockerface"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/signature"
)

// The docker face. Invoked as docker, podman or nerdctl (a link to kptr),
// or as `kptr docker ...`, kptr takes the command lines kustomize's
// container filter and kpt's container runtime give a container CLI
// (dockerface parses them) and runs the function the way fn eval --image
// does: the same cache (pull policy, mirrors, signature policy), the same
// sandbox (auto picks the tier), the same memo. The operator's policy
// (dockerpolicy.go) decides what of the caller's network, mounts and
// environment the function gets. Results follow docker's conventions:
// the function's own stdout, stderr and exit code; kptr's failures as 125
// (could not run it), 126 and 127 (the entrypoint cannot start or is not
// there), one line on stderr.

// Docker's exit codes for what is not the container's own exit.
const (
	dockerExitFailed        = 125 // the CLI or the daemon failed
	dockerExitNotExecutable = 126
	dockerExitNotFound      = 127
)

// dockerCompatVersion is the docker client version the face answers with
// (kpt requires 20.10 or later); the build metadata says it is kptr.
const dockerCompatVersion = "24.0.0+kptr"

// invokedAsDocker reports whether the binary was called through the name of
// a container CLI kustomize or kpt runs.
func invokedAsDocker(argv0 string) bool {
	switch filepath.Base(argv0) {
	case "docker", "podman", "nerdctl":
		return true
	}
	return false
}

// dockerCmd is `kptr docker ...`: the face with kptr's name in front.
func (g *globals) dockerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "docker ARGS...",
		Short: "Run KRM functions from the command lines kustomize and kpt give docker",
		Long: `Take the docker command lines kustomize (containerized KRM functions,
kustomize build --enable-alpha-plugins) and kpt (KPT_FN_RUNTIME=docker or
podman) run: run, version, pull, image inspect, tag, rmi and images, on kptr's
own cache and sandbox. Installed as "docker" (make install-docker-link) it
stands in for docker where there is none, as in an Argo CD repo-server.

Operator settings (variables): KPTR_ALLOW_NETWORK lets --network host
through; KPTR_DOCKER_BIND_DIRS (colon-separated) are the directories bind
mounts may come from (default: the current directory); KPTR_DOCKER_ENV
(comma-separated) names the variables "-e NAME" may take from the caller's
environment (default: LOG_TO_STDERR,STRUCTURED_RESULTS); KPTR_ALLOWED_IMAGES,
when set, is the allow-list of images. Any other flag or subcommand is
refused with exit 125.

Exit codes: the function's own; 125 kptr could not run it (a refused
command line or policy, a registry, the cache, the sandbox); 126 the
entrypoint is not executable; 127 the entrypoint is not in the image.`,
		Example: `  kptr fn source my-package | kptr docker run --rm -i --network none ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1
  ln -s "$(command -v kptr)" ~/bin/docker && kustomize build --enable-alpha-plugins .`,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			if code := g.docker(c.Context(), args); code != 0 {
				return withCode(code, errReported)
			}
			return nil
		},
	}
}

// dockerMain is the face invoked as docker, podman or nerdctl: an
// interruption (SIGINT, SIGTERM) ends the function and exits as a shell
// reports the signal, as docker run does.
func (g *globals) dockerMain(ctx context.Context, args []string) int {
	code := g.docker(ctx, args)
	if sig := interruptedBy(ctx); sig != 0 {
		return 128 + int(sig)
	}
	return code
}

// docker runs one docker command line (without the program name) and
// returns its exit code; it prints its own errors, one line each.
func (g *globals) docker(ctx context.Context, args []string) int {
	fail := func(err error) int {
		fmt.Fprintf(g.stderr, "kptr (docker): %s\n", oneLine(redact(err.Error())))
		return dockerExitFailed
	}
	cmd, err := dockerface.Parse(args)
	if err != nil {
		return fail(err)
	}
	// kptr's settings come from the operator's variables (KPTR_*), as for
	// any kptr command; the command line is the caller's, docker's.
	fs := pflag.NewFlagSet("docker", pflag.ContinueOnError)
	g.addSettings(fs, fnScopes, true)
	if err := g.checkSettings(fs); err != nil {
		return fail(err)
	}
	// docker's names: "fn:v1" is docker.io/library/fn:v1, never kpt's catalog
	g.imagePrefix = ""
	// success prints nothing but the function's output
	if g.getenv("KPTR_PROGRESS") == "" {
		g.progress = "none"
	}
	if g.getenv("KPTR_LOG_LEVEL") == "" {
		g.logLevel = "warn"
	}
	switch cmd.Kind {
	case dockerface.KindHelp:
		root := g.kptrRoot()
		root.SetOut(g.stdout)
		if c, _, err := root.Find([]string{"docker"}); err == nil {
			return boolCode(c.Help() != nil)
		}
		return dockerExitFailed
	case dockerface.KindRun:
		code, err := g.dockerRun(ctx, cmd.Run)
		if err != nil {
			fmt.Fprintf(g.stderr, "kptr (docker): %s\n", oneLine(redact(err.Error())))
		}
		return code
	case dockerface.KindVersion:
		err = g.dockerVersion(cmd.Format)
	case dockerface.KindPull:
		err = g.dockerPull(ctx, cmd.Images[0])
	case dockerface.KindInspect:
		return g.dockerInspect(ctx, cmd.Images, cmd.Format)
	case dockerface.KindTag:
		err = g.withCache(ctx, func(c *cache.Cache) error { return c.Tag(ctx, cmd.Images[0], cmd.Images[1]) })
	case dockerface.KindRmi:
		return g.dockerRmi(ctx, cmd.Images)
	case dockerface.KindImages:
		err = g.dockerImages(ctx, cmd)
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

// boolCode is docker's exit code for a command that failed or not.
func boolCode(failed bool) int {
	if failed {
		return dockerExitFailed
	}
	return 0
}

// dockerRun runs the function: the operator's policy turns the caller's
// request into an invocation (or refuses it), and the function goes through
// fn eval's resolver and runner. It returns the exit code and, for kptr's
// own failure, its cause.
func (g *globals) dockerRun(ctx context.Context, r dockerface.Run) (int, error) {
	pol := dockerPolicyFromEnv(g.getenv)
	switch r.Pull {
	case "never":
		g.pullPolicy = string(cache.PullNever)
	case "always":
		g.pullPolicy = string(cache.PullAlways)
	case "missing":
		g.pullPolicy = string(cache.PullIfNotPresent)
	}
	inv, cleanup, err := pol.invocation(r, g.getenv, g.volumeDir())
	defer cleanup()
	if err != nil {
		return dockerExitFailed, err
	}
	inv.Timeout = g.fnTimeout
	inv.MaxOutput = g.maxFnOutput()
	if r.Interactive {
		inv.Stdin = g.stdin
	} else {
		inv.Stdin = strings.NewReader("")
	}
	// fn eval's chain: the cache, the sandbox auto picks, the memo, and the
	// operator's allow-list when there is one; quiet: nothing but the
	// function's output
	cfg := g.fnConfig(g.memoOn(false), false, pol.chainPolicy())
	cfg.Quiet = true
	env := fnenv.New(cfg)
	b, err := env.Resolve(ctx, r.Image)
	if err != nil {
		return dockerExitFailed, err
	}
	// docker run's own overrides of the image config
	if r.User != "" {
		b.Config.User = r.User
	}
	if r.Args != nil {
		b.Config.Cmd = r.Args
	}
	out, err := env.Runner().Run(ctx, b, inv)
	switch {
	case errors.Is(err, runtime.ErrNoEntrypoint):
		return dockerExitNotFound, err
	case errors.Is(err, runtime.ErrNotExecutable):
		return dockerExitNotExecutable, err
	case errors.Is(err, runtime.ErrNoMounts):
		// the tier's own words name kpt fn eval's flag; this caller wrote
		// docker run's, and may not know which tier runs here
		return dockerExitFailed, fmt.Errorf("%s: run --mount needs kptr's namespace tier; here kptr runs its landlock tier (no user namespaces), which has no mount namespace", r.Image)
	case err != nil:
		return dockerExitFailed, err
	}
	if _, err := g.stdout.Write(out.Stdout); err != nil {
		return dockerExitFailed, err
	}
	_, _ = g.stderr.Write(out.Stderr)
	return out.ExitCode, nil
}

// dockerVersion prints the version: docker's short line for --version, a
// template over {Client, Server} for --format, else both lines.
func (g *globals) dockerVersion(format string) error {
	v := struct {
		Client, Server struct{ Version, APIVersion, Kptr string }
	}{}
	v.Client.Version, v.Client.APIVersion, v.Client.Kptr = dockerCompatVersion, "1.43", version
	v.Server = v.Client
	if format == "" {
		format = "Client: kptr's docker face\n Version: {{.Client.Version}}\n kptr: {{.Client.Kptr}}"
	}
	return g.printTemplate(format, v)
}

// printTemplate prints data through a --format template, with a newline.
func (g *globals) printTemplate(format string, data any) error {
	t, err := template.New("format").Option("missingkey=error").Parse(format)
	if err != nil {
		return fmt.Errorf("--format: %v", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return fmt.Errorf("--format: %v", err)
	}
	b.WriteByte('\n')
	_, err = g.stdout.Write(b.Bytes())
	return err
}

// withCache runs f on the command's cache.
func (g *globals) withCache(ctx context.Context, f func(*cache.Cache) error) error {
	c, err := g.openCache(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// dockerPull asks the registry again, as docker pull does (policy Always),
// and prints the image's name.
func (g *globals) dockerPull(ctx context.Context, ref string) error {
	g.pullPolicy = string(cache.PullAlways)
	env := g.fnEnv(false, false, dockerPolicyFromEnv(g.getenv).chainPolicy())
	defer env.Close()
	if _, err := env.Pull(ctx, ref); err != nil {
		return err
	}
	_, err := fmt.Fprintln(g.stdout, ref)
	return err
}

// dockerImage is what image inspect prints of a cached image.
type dockerImage struct {
	Id           string //nolint:revive // docker's name, which --format templates use
	RepoTags     []string
	RepoDigests  []string
	Os           string
	Architecture string
	Size         int64
}

func newDockerImage(im cache.Image) dockerImage {
	d := dockerImage{Id: im.Digest.String(), RepoTags: []string{}, RepoDigests: []string{}, Size: im.Bytes}
	for _, r := range im.Refs {
		d.RepoTags = append(d.RepoTags, r)
		repo, _, _ := imageref.Split(r)
		d.RepoDigests = append(d.RepoDigests, repo+"@"+im.Digest.String())
	}
	d.Os, d.Architecture, _ = strings.Cut(im.Platform, "/")
	return d
}

// dockerInspect answers from the cache alone, as docker image inspect
// answers from docker's store: exit 1 and "Error: No such image" for one
// that is not there.
func (g *globals) dockerInspect(ctx context.Context, refs []string, format string) int {
	c, err := g.openCache(ctx)
	if err != nil {
		fmt.Fprintf(g.stderr, "kptr (docker): %s\n", oneLine(redact(err.Error())))
		return dockerExitFailed
	}
	defer c.Close()
	code := 0
	var found []dockerImage
	for _, ref := range refs {
		im, ok, err := c.Present(ctx, ref)
		if err != nil || !ok {
			fmt.Fprintf(g.stderr, "Error: No such image: %s\n", ref)
			code = 1
			continue
		}
		found = append(found, newDockerImage(im))
	}
	if format != "" {
		for _, d := range found {
			if err := g.printTemplate(format, d); err != nil {
				fmt.Fprintf(g.stderr, "kptr (docker): %s\n", err)
				return dockerExitFailed
			}
		}
		return code
	}
	if found == nil {
		found = []dockerImage{}
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "    ")
	if err := enc.Encode(found); err != nil {
		return dockerExitFailed
	}
	return code
}

// dockerRmi forgets names, as docker rmi does; the images go at the next
// prune (kptr cache prune) once no name points to them.
func (g *globals) dockerRmi(ctx context.Context, refs []string) int {
	code := 0
	err := g.withCache(ctx, func(c *cache.Cache) error {
		for _, ref := range refs {
			if err := c.Untag(ctx, ref); err != nil {
				if errors.Is(err, cache.ErrNotCached) {
					fmt.Fprintf(g.stderr, "Error: No such image: %s\n", ref)
				} else {
					fmt.Fprintf(g.stderr, "kptr (docker): %s\n", oneLine(redact(err.Error())))
				}
				code = 1
				continue
			}
			fmt.Fprintf(g.stdout, "Untagged: %s\n", ref)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(g.stderr, "kptr (docker): %s\n", oneLine(redact(err.Error())))
		return dockerExitFailed
	}
	return code
}

// dockerImages lists the cache as docker images lists its store: one row
// per name, optionally only the repository given.
func (g *globals) dockerImages(ctx context.Context, cmd dockerface.Command) error {
	return g.withCache(ctx, func(c *cache.Cache) error {
		list, err := c.List(ctx)
		if err != nil {
			return err
		}
		var w io.Writer = g.stdout
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 3, ' ', 0)
		if !cmd.Quiet && cmd.Format == "" {
			w = tw
			fmt.Fprintln(w, "REPOSITORY\tTAG\tIMAGE ID\tSIZE")
		}
		for _, im := range list {
			d := newDockerImage(im)
			for _, ref := range d.RepoTags {
				repo, tag, _ := imageref.Split(ref)
				if tag == "" {
					tag = "<none>"
				}
				if len(cmd.Images) == 1 && repo != cmd.Images[0] && ref != cmd.Images[0] {
					continue
				}
				switch {
				case cmd.Quiet:
					fmt.Fprintln(w, shortDigest(im.Digest))
				case cmd.Format != "":
					row := struct{ Repository, Tag, ID, Size string }{repo, tag, shortDigest(im.Digest), humanBytes(im.Bytes)}
					if err := g.printTemplate(cmd.Format, row); err != nil {
						return err
					}
				default:
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", repo, tag, shortDigest(im.Digest), humanBytes(im.Bytes))
				}
			}
		}
		return tw.Flush()
	})
}

// volumeDir is where named volumes live: beside the cache.
func (g *globals) volumeDir() string {
	if g.cacheDir == "" {
		return ""
	}
	return filepath.Join(g.cacheDir, "volumes")
}

// installDockerCmd is `kptr install-docker DIR`: kptr copies itself into
// DIR as kptr, with docker a link to it. What an init container of kptr's
// image (which has no shell and no cp) runs to put the docker face on
// another container's PATH through a shared volume
// (deploy/variants/kustomize-docker), as KSOPS and argocd-vault-plugin
// install theirs.
func (g *globals) installDockerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "install-docker DIR",
		Short: "Copy kptr into DIR with docker a link to it (an init container's job)",
		Long: `Copy this kptr binary into DIR (which must exist) as DIR/kptr, written to a
temporary name and renamed into place, with its signature verifier
(kptr-sigverify) beside it, and make DIR/docker a symbolic link to
it: with DIR on a container's PATH, kustomize and kpt find kptr as their
docker (docs/docker.md). An existing DIR/docker that is not that link is left
alone and refused.`,
		Example: `  # an init container sharing /opt/kptr/bin with argocd-repo-server
  kptr install-docker /opt/kptr/bin`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return installDocker(args[0])
		},
	}
}

func installDocker(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return withCode(exitEnv, err)
	}
	d, err := os.OpenRoot(dir)
	if err != nil {
		return usageError("%v", err)
	}
	defer d.Close()
	if target, err := d.Readlink("docker"); err == nil && target == "kptr" {
		// already ours: the copy below replaces the binary
	} else if _, err := d.Lstat("docker"); err == nil {
		return usageError("%s exists and is not a link to kptr; kptr stands in for docker only where there is none", filepath.Join(dir, "docker"))
	}
	if err := copyExecutable(d, self, "kptr"); err != nil {
		return err
	}
	// its signature verifier travels with it: beside kptr, where it looks
	if v, err := signature.VerifierPath(); err == nil {
		if err := copyExecutable(d, v, filepath.Base(v)); err != nil {
			return err
		}
	}
	if _, err := d.Lstat("docker"); err != nil {
		if err := d.Symlink("kptr", "docker"); err != nil {
			return withCode(exitEnv, err)
		}
	}
	return nil
}

// copyExecutable copies src into d as name, written to a temporary name and
// renamed into place.
func copyExecutable(d *os.Root, src, name string) error {
	in, err := os.Open(src)
	if err != nil {
		return withCode(exitEnv, err)
	}
	defer in.Close()
	out, err := d.OpenFile(name+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return withCode(exitEnv, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return withCode(exitEnv, err)
	}
	if err := out.Close(); err != nil {
		return withCode(exitEnv, err)
	}
	if err := d.Rename(name+".tmp", name); err != nil {
		return withCode(exitEnv, err)
	}
	return nil
}
