package main

import (
	"archive/tar"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	repoapi "github.com/argoproj/argo-cd/v3/reposerver/apiclient"

	"github.com/kptr-dev/kptr/test/bench/pkggen"
	"github.com/kptr-dev/kptr/test/registry"
)

// make bench-fleet (issue 34) passes these; the defaults are the fleet.
var (
	fleetApps        = flag.Int("fleet-apps", 100, "BenchmarkFleet: Applications (kpt packages) in the monorepo")
	fleetConcurrency = flag.Int("fleet-concurrency", 20, "BenchmarkFleet: manifest requests in flight (the application controller's default --status-processors)")
	fleetCatalog     = flag.String("fleet-catalog", "/work/shared/catalog/oci", "BenchmarkFleet: OCI layout with the catalog's apply-setters, set-namespace, set-labels and starlark")
)

// The catalog functions the fleet's pipelines run, and the versions pushed
// of each: tag copies of the one real image, each with its own config
// label, so that every version is an image of its own (own digest, own
// rootfs) sharing the real layers. The packages use the first three;
// fleetBump is the version the bump moves 30 packages' set-labels to.
var (
	fleetFns      = []string{"apply-setters", "set-namespace", "set-labels", "starlark"}
	fleetVersions = []string{"v0.1.0", "v0.2.0", "v0.3.0", "v0.4.0"}
)

const (
	fleetPrefix = "ghcr.io/kptdev/krm-functions-catalog/"
	fleetBump   = "v0.4.0"
	fleetBumped = 30
)

// BenchmarkFleet is issue 34's fleet: a monorepo of -fleet-apps kpt
// packages (test/bench/pkggen's realistic package at 20 to 200 resources,
// pipelines of the real catalog functions in several versions, a fifth of
// the packages carrying the same common/ subpackage with a pipeline of its
// own), served by git daemon, one Application each, through the real
// argocd-repo-server (Redis) and the sidecar (argocd-cmp-server with
// plugin.yaml as uid 999, no capabilities, under containerd's
// RuntimeDefault seccomp profile: the landlock tier), images pulled from a
// local registry through KPTR_MIRRORS. Each refresh sends every
// Application's ManifestRequest, -fleet-concurrency at a time (the
// repo-server's own limit, --parallelismlimit, is 0: unlimited, its
// default), after a commit: cold (empty caches), warm (a commit touching
// only README.md), one package changed, one function's version bumped in 30
// packages. The same refreshes then run as `kptr generate --sandbox none` in
// a checkout of each commit, same concurrency, without Argo CD; and every
// function of the fleet alone (each catalog binary run on the exact
// ResourceList kptr gives it, captured once), the work any tool must do.
// It prints one table; run it once (-benchtime 1x).
func BenchmarkFleet(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("BenchmarkFleet runs the sidecar as uid 999 under seccomp, as root")
	}
	f := newFleet(b)
	var report fleetReport
	report.header(f)
	for b.Loop() {
		report.chain = f.refreshes(b, "chain")
		report.chainAll = f.refreshes(b, "chain-all")
		report.named = f.refreshes(b, "chain-named")
		report.direct = f.refreshes(b, "direct")
		report.fns, report.fnsChanged, report.fnsBumped = f.functionsAlone(b)
	}
	report.print(f)
}

type fleet struct {
	root     string
	reg      *registry.Registry
	work     string // the monorepo's working tree
	apps     []string
	sizes    map[string]int
	repoURL  string
	commits  []fleetCommit
	kptr     string
	bins     map[string]string // function binary per catalog function
	captured string            // captured ResourceLists, per app
	sidecar  *server           // the chain's sidecar, shared by both ways
	changed  string            // the app the "one changed" commits change
	bumped   int               // packages the bump commit moves (fleetBumped, or all when fewer)
	pulls    time.Duration     // every image the fleet names into an empty cache
	imgBytes map[string]int64  // compressed size per catalog function
	cacheDu  int64             // the chain's cache after the cold refresh
	repoDu   int64             // the checkout each generate receives (.git included)
}

type fleetCommit struct {
	phase, rev string
	only       []string // the apps to request; nil: all
}

func newFleet(b *testing.B) *fleet {
	b.Helper()
	root, err := os.MkdirTemp("", "kptr-fleet-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	f := &fleet{root: root, reg: registry.Start(b), sizes: map[string]int{}, kptr: kptrBinary(b),
		bins: map[string]string{}, imgBytes: map[string]int64{}}
	f.pushCatalog(b)
	f.writeMonorepo(b)
	return f
}

// pushCatalog pushes each catalog function under every version and keeps
// its binary (/usr/local/bin/function) for the functions-alone runs.
func (f *fleet) pushCatalog(b *testing.B) {
	idx, err := layout.ImageIndexFromPath(*fleetCatalog)
	if err != nil {
		b.Fatalf("the catalog images (-fleet-catalog): %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(filepath.Join(f.root, "bin"), 0o755)
	for _, fn := range fleetFns {
		var img v1.Image
		for _, d := range im.Manifests {
			if d.Annotations["org.opencontainers.image.ref.name"] == fn {
				img, err = idx.Image(d.Digest)
			}
		}
		if img == nil || err != nil {
			b.Fatalf("%s: no image %s: %v", *fleetCatalog, fn, err)
		}
		ls, _ := img.Layers()
		for _, l := range ls {
			n, _ := l.Size()
			f.imgBytes[fn] += n
		}
		for _, v := range fleetVersions {
			cf, err := img.ConfigFile()
			if err != nil {
				b.Fatal(err)
			}
			cfg := cf.Config.DeepCopy()
			if cfg.Labels == nil {
				cfg.Labels = map[string]string{}
			}
			cfg.Labels["org.opencontainers.image.version"] = v
			vi, err := mutate.Config(img, *cfg)
			if err != nil {
				b.Fatal(err)
			}
			ref, err := name.ParseReference(f.reg.Addr + "/kptdev/krm-functions-catalog/" + fn + ":" + v)
			if err != nil {
				b.Fatal(err)
			}
			if err := remote.Write(ref, vi); err != nil {
				b.Fatal(err)
			}
		}
		f.bins[fn] = filepath.Join(f.root, "bin", fn)
		if err := extractFile(mutate.Extract(img), "usr/local/bin/function", f.bins[fn]); err != nil {
			b.Fatalf("%s: %v", fn, err)
		}
	}
}

func extractFile(rc io.ReadCloser, member, dst string) error {
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return fmt.Errorf("no %s in the image: %v", member, err)
		}
		if strings.TrimPrefix(h.Name, "./") == member {
			w, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			return err
		}
	}
}

func fleetImage(fn, version string) string { return fleetPrefix + fn + ":" + version }

// writeMonorepo writes the apps, commits them and the three later commits,
// and serves the repository with git daemon.
func (f *fleet) writeMonorepo(b *testing.B) {
	f.work = filepath.Join(f.root, "monorepo")
	os.MkdirAll(f.work, 0o755)
	write(b, f.work, map[string]string{"README.md": "the fleet\n"})
	for i := range *fleetApps {
		app := fmt.Sprintf("app-%03d", i)
		f.apps = append(f.apps, app)
		f.sizes[app] = 20 + (i*37)%181 // 20 … 200, spread
		version := func(k int) string { return fleetVersions[(i+k)%3] }
		dir := filepath.Join(f.work, "apps", app)
		err := pkggen.Write(dir, pkggen.Options{Resources: f.sizes[app], Function: func(fixture string) (string, string) {
			switch fixture {
			case "apply-setters":
				return "image", fleetImage("apply-setters", version(0))
			case "set-namespace":
				return "image", fleetImage("set-namespace", version(1))
			case "set-labels-catalog":
				return "image", fleetImage("set-labels", version(2))
			}
			return "image", fleetImage("starlark", version(0))
		}})
		if err != nil {
			b.Fatal(err)
		}
		// The validator: the catalog's starlark running a program that
		// reads every resource (a StarlarkRun in configPath).
		kf := filepath.Join(dir, "Kptfile")
		k, _ := os.ReadFile(kf)
		s := string(k)
		s = s[:strings.Index(s, "  validators:\n")] + "  validators:\n    - image: " + fleetImage("starlark", version(0)) + "\n      configPath: validate.yaml\n"
		files := map[string]string{"Kptfile": s, "validate.yaml": fleetValidator}
		if i%5 == 0 { // the shared subpackage, the same bytes in each
			files["common/Kptfile"] = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: common\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\npipeline:\n  mutators:\n    - image: " + fleetImage("set-labels", "v0.1.0") + "\n      configMap:\n        shared: common\n"
			files["common/policy.yaml"] = fleetCommon
		}
		write(b, dir, files)
	}
	runIn(b, f.work, "git", "init", "-q", "-b", "main")
	commit := func(phase string, only []string) {
		runIn(b, f.work, "git", "add", "-A")
		runIn(b, f.work, "git", "commit", "-q", "-m", phase)
		f.commits = append(f.commits, fleetCommit{phase: phase, rev: runIn(b, f.work, "git", "rev-parse", "HEAD"), only: only})
	}
	commit("cold", nil)
	write(b, f.work, map[string]string{"README.md": "the fleet, documented\n"})
	commit("warm", nil)
	changed := f.apps[len(f.apps)/2]
	f.changed = changed
	tag := pkggen.Setters["tag"]
	setters := func(to string) {
		p := filepath.Join(f.work, "apps", changed, "setters.yaml")
		s, _ := os.ReadFile(p)
		os.WriteFile(p, []byte(strings.Replace(string(s), tag, to, 1)), 0o644)
		tag = to
	}
	setters("v1.2.4")
	commit("one changed", nil)
	setters("v1.2.5")
	commit("one changed, alone", []string{changed})
	n := 0
	for _, app := range f.apps {
		kf := filepath.Join(f.work, "apps", app, "Kptfile")
		k, _ := os.ReadFile(kf)
		for _, v := range fleetVersions[:3] {
			old := fleetImage("set-labels", v)
			if n < fleetBumped && strings.Contains(string(k), old) {
				os.WriteFile(kf, []byte(strings.Replace(string(k), old, fleetImage("set-labels", fleetBump), 1)), 0o644)
				n++
				break
			}
		}
	}
	commit("bump", nil)
	f.bumped = n
	f.repoDu = du(f.work)
	port := freePort(b)
	daemon(b, "git daemon", port, nil, "git", "daemon", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--export-all", "--base-path="+f.root, f.root)
	f.repoURL = fmt.Sprintf("git://127.0.0.1:%d/monorepo", port)
}

const fleetValidator = `apiVersion: fn.kpt.dev/v1alpha1
kind: StarlarkRun
metadata:
  name: require-team-label
  annotations:
    config.kubernetes.io/local-config: "true"
source: |
  for r in ctx.resource_list["items"]:
    if r["kind"] == "Deployment" and "team" not in r["metadata"].get("labels", {}):
      fail("Deployment " + r["metadata"]["name"] + " has no team label")
`

const fleetCommon = `apiVersion: v1
kind: ConfigMap
metadata:
  name: common-policy
data:
  retention: 30d
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: default-deny
spec:
  podSelector: {}
  policyTypes: [Ingress]
`

// fleetEnv is the operator's settings, the same for the sidecar and the
// direct runs.
func (f *fleet) env() map[string]string {
	return map[string]string{
		"KPTR_ALLOWED_IMAGES": fleetPrefix + "*",
		"KPTR_MIRRORS":        "ghcr.io=" + f.reg.Addr,
		"KPTR_TIMEOUT":        "50s",
	}
}

// refresh is one refresh of the fleet: wall time, per-app times, retries.
type refresh struct {
	phase   string
	apps    int
	wall    time.Duration
	slowest time.Duration
	retries int
	failed  int       // apps that failed three times (the controller would try again later)
	rssKB   []int     // per generate, from the sidecar's log
	kptrSec []float64 // each generate's own wall time, from the same log
}

// refreshes runs every commit's refresh through way "chain" (Argo CD, the
// Applications annotated as Argo CD advises for a monorepo), or "direct"
// (kptr generate --sandbox none in a checkout); "chain-all" runs only the
// warm commit's refresh without the annotation (every Application
// regenerated) through a second repo-server with its own Redis in front of
// the chain's sidecar, which has rendered every package before: the
// unchanged refresh as kptr's memo carries it. (A whole second
// installation, cold first, took 22 of the benchmark's 28 minutes here,
// nearly all of it Argo CD sending and unpacking the whole repository.)
func (f *fleet) refreshes(b *testing.B, way string) []refresh {
	var out []refresh
	switch way {
	case "chain", "chain-all", "chain-named":
		// chain-named: a third installation, cold, with deploy/variants/fleet's
		// plugin.yaml (no discover section) and Applications that name the
		// plugin, so that the repo-server never sends the repository for
		// discovery.
		annotated, named := way != "chain-all", way == "chain-named"
		commits := f.commits
		seccomp := filepath.Join(repoRoot, "test/e2e/argocd/testdata/runtime-default/containerd-docker-default.json")
		s := f.sidecar
		switch way {
		case "chain":
			f.sidecar = startServerWith(b, f.env(), sidecarOptions{seccomp: seccomp, rss: true})
			s = f.sidecar
		case "chain-all":
			commits = slices.DeleteFunc(slices.Clone(commits), func(cm fleetCommit) bool { return cm.phase != "warm" })
		case "chain-named":
			s = startServerWith(b, f.env(), sidecarOptions{seccomp: seccomp, rss: true, plugin: fleetVariantPlugin(b)})
			commits = commits[:1]
		}
		c := startRepoServer(b, s, startRedis(b), f.repoURL, "", "ARGOCD_REPO_SERVER_PLUGIN_USE_MANIFEST_GENERATE_PATHS=true")
		var mu sync.Mutex
		synced := map[string]string{} // app → the commit it last compared
		for _, cm := range commits {
			c.rev = cm.rev
			kb, _ := rssLog(s)
			rssBefore := len(kb)
			r := f.run(b, cm, func(ctx context.Context, app string) error {
				var plugin *v1alpha1.ApplicationSourcePlugin
				if named {
					plugin = kptPlugin()
				}
				q := c.request(app, c.source("apps/"+app, plugin))
				if annotated {
					// The application controller (controller/state.go) with
					// the manifest-generate-paths annotation ".": once an
					// Application has compared a commit, it first asks the
					// repo-server whether anything under its path changed;
					// if not, the repo-server moves the cached manifests to
					// the new commit and GenerateManifest answers from Redis.
					// Discovery is still sent the whole repository; generate
					// the package (ARGOCD_REPO_SERVER_PLUGIN_USE_MANIFEST_GENERATE_PATHS).
					q.AnnotationManifestGeneratePaths = "."
					mu.Lock()
					prev := synced[app]
					mu.Unlock()
					if prev != "" {
						if _, err := c.repo.UpdateRevisionForPaths(ctx, &repoapi.UpdateRevisionForPathsRequest{
							Repo: q.Repo, AppLabelKey: q.AppLabelKey, AppName: q.AppName, Namespace: q.Namespace,
							ApplicationSource: q.ApplicationSource, TrackingMethod: q.TrackingMethod,
							KubeVersion: q.KubeVersion, ApiVersions: q.ApiVersions,
							SyncedRevision: prev, Revision: cm.rev, Paths: []string{"apps/" + app},
						}); err != nil {
							return fmt.Errorf("UpdateRevisionForPaths: %w", err)
						}
					}
				}
				if _, err := c.generate(ctx, q); err != nil {
					return err
				}
				mu.Lock()
				synced[app] = cm.rev
				mu.Unlock()
				return nil
			})
			kb, sec := rssLog(s)
			r.rssKB, r.kptrSec = kb[rssBefore:], sec[rssBefore:]
			if cm.phase == "cold" && way == "chain" {
				f.cacheDu = du(s.cache)
			}
			out = append(out, r)
		}
	case "direct":
		cache := filepath.Join(f.root, "direct-cache")
		for _, cm := range f.commits {
			tree := filepath.Join(f.root, "checkout-"+cm.rev[:12])
			runIn(b, f.work, "git", "worktree", "add", "-q", "--detach", tree, cm.rev)
			out = append(out, f.run(b, cm, func(ctx context.Context, app string) error {
				cmd := exec.CommandContext(ctx, f.kptr, "generate")
				cmd.Dir = filepath.Join(tree, "apps", app)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + f.root, "KPTR_CACHE_DIR=" + cache, "KPTR_SANDBOX=none", "KPTR_PROGRESS=none"}
				for k, v := range f.env() {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				out, err := cmd.CombinedOutput()
				if err != nil {
					return fmt.Errorf("%v: %s", err, lastLine(out))
				}
				return nil
			}))
		}
		// The pulls alone: every image the fleet names into an empty cache.
		t0 := time.Now()
		var args []string
		for _, fn := range fleetFns {
			for _, v := range fleetVersions {
				args = append(args, "--image", fleetImage(fn, v))
			}
		}
		cmd := exec.Command(f.kptr, append([]string{"prewarm", "--cache-dir", filepath.Join(f.root, "pulls-cache"), "--mirror", "ghcr.io=" + f.reg.Addr, "--progress", "none"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("kptr prewarm: %v\n%s", err, out)
		}
		f.pulls = time.Since(t0)
	}
	return out
}

// run requests the apps of commit cm, -fleet-concurrency at a time, each
// within the controller's 60 s; a failure is retried (as the controller
// retries) up to twice, then fails the benchmark.
func (f *fleet) run(b *testing.B, cm fleetCommit, one func(ctx context.Context, app string) error) refresh {
	apps := cm.only
	if apps == nil {
		apps = f.apps
	}
	r := refresh{phase: cm.phase, apps: len(apps)}
	var mu sync.Mutex
	var failed []string
	jobs := make(chan string)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range *fleetConcurrency {
		wg.Go(func() {
			for app := range jobs {
				a0 := time.Now()
				var err error
				for try := 0; try < 3; try++ {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					err = one(ctx, app)
					cancel()
					if err == nil {
						break
					}
					mu.Lock()
					r.retries++
					mu.Unlock()
				}
				mu.Lock()
				r.slowest = max(r.slowest, time.Since(a0))
				if err != nil {
					failed = append(failed, app+": "+err.Error())
				}
				mu.Unlock()
			}
		})
	}
	for _, app := range apps {
		jobs <- app
	}
	close(jobs)
	wg.Wait()
	r.wall = time.Since(t0)
	r.failed = len(failed)
	fmt.Fprintf(os.Stderr, "   %s: %d apps in %s, %d failed three times (load %s)\n", cm.phase, len(apps), r.wall.Round(time.Millisecond), r.failed, loadavg())
	if len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "   first failure: %s\n", failed[0])
	}
	return r
}

// rssLog reads each generate's peak RSS (KiB) and wall time (s) from the
// sidecar's kptr-rss.log.
func rssLog(s *server) (kb []int, sec []float64) {
	b, _ := os.ReadFile(filepath.Join(s.tmp, "kptr-rss.log"))
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) == 3 && fs[2] == "generate" {
			k, err1 := strconv.Atoi(fs[0])
			e, err2 := strconv.ParseFloat(fs[1], 64)
			if err1 == nil && err2 == nil {
				kb, sec = append(kb, k), append(sec, e)
			}
		}
	}
	return kb, sec
}

func du(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// functionsAlone captures the ResourceList every function of every app gets
// at the first commit (kptr fn render with each function an exec: script
// that saves its stdin and runs the catalog binary), then times the binaries
// alone on them: the whole fleet, -fleet-concurrency apps at a time (each
// app's functions in turn), and the changed app and the bumped apps alone.
func (f *fleet) functionsAlone(b *testing.B) (all, changed, bumped time.Duration) {
	f.captured = filepath.Join(f.root, "captured")
	tree := filepath.Join(f.root, "capture-tree")
	runIn(b, f.work, "git", "worktree", "add", "-q", "--detach", tree, f.commits[0].rev)
	scripts := filepath.Join(f.root, "capture-bin")
	os.MkdirAll(scripts, 0o755)
	cur := filepath.Join(f.root, "capture-current")
	for _, fn := range fleetFns {
		os.WriteFile(filepath.Join(scripts, fn), []byte("#!/bin/sh\nf=$(mktemp \"$(cat "+cur+")/"+fn+".XXXXXX\")\ntee \"$f\" | "+f.bins[fn]+"\n"), 0o755)
	}
	inputs := map[string][][2]string{} // app → (function, input file) in pipeline order
	for _, app := range f.apps {
		dir := filepath.Join(tree, "apps", app)
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Name() == "Kptfile" {
				k, _ := os.ReadFile(p)
				s := string(k)
				for _, fn := range fleetFns {
					for _, v := range fleetVersions {
						s = strings.ReplaceAll(s, "image: "+fleetImage(fn, v), "exec: "+filepath.Join(scripts, fn))
					}
				}
				os.WriteFile(p, []byte(s), 0o644)
			}
			return nil
		})
		out := filepath.Join(f.captured, app)
		os.MkdirAll(out, 0o755)
		os.WriteFile(cur, []byte(out), 0o644)
		cmd := exec.Command(f.kptr, "fn", "render", "--allow-exec", "--sandbox", "none", "--progress", "none", dir)
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("capturing %s: %v\n%s", app, err, o)
		}
		ents, _ := os.ReadDir(out)
		for _, e := range ents { // the order in which they run does not change their time
			fn, _, _ := strings.Cut(e.Name(), ".")
			inputs[app] = append(inputs[app], [2]string{fn, filepath.Join(out, e.Name())})
		}
	}
	runApps := func(apps []string) time.Duration {
		jobs := make(chan string)
		var wg sync.WaitGroup
		t0 := time.Now()
		for range *fleetConcurrency {
			wg.Go(func() {
				for app := range jobs {
					for _, in := range inputs[app] {
						stdin, _ := os.Open(in[1])
						cmd := exec.Command(f.bins[in[0]])
						cmd.Stdin = stdin
						if o, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(o), "kind: ResourceList") {
							b.Errorf("%s alone on %s: %v", in[0], in[1], err)
						}
						stdin.Close()
					}
				}
			})
		}
		for _, a := range apps {
			jobs <- a
		}
		close(jobs)
		wg.Wait()
		return time.Since(t0)
	}
	all = runApps(f.apps)
	changed = runApps([]string{f.changed})
	var bumpedApps []string
	for _, app := range f.apps {
		k, _ := os.ReadFile(filepath.Join(f.work, "apps", app, "Kptfile"))
		if strings.Contains(string(k), fleetImage("set-labels", fleetBump)) {
			bumpedApps = append(bumpedApps, app)
		}
	}
	bumped = runApps(bumpedApps)
	return all, changed, bumped
}

type fleetReport struct {
	started                    time.Time
	load                       string
	chain, chainAll, direct    []refresh
	named                      []refresh // the cold refresh, a named plugin without discovery
	fns, fnsChanged, fnsBumped time.Duration
}

func (r *fleetReport) header(f *fleet) {
	r.started = time.Now()
	r.load = loadavg()
	resources := 0
	for _, n := range f.sizes {
		resources += n
	}
	fmt.Printf("== BenchmarkFleet: %d Applications, %d resources (%d–%d per package), pipelines of %s in %d versions each (tag copies), %d in flight\n",
		len(f.apps), resources, 20, 200, strings.Join(fleetFns, ", "), len(fleetVersions), *fleetConcurrency)
	fmt.Printf("   load average at start: %s\n", r.load)
}

func (r *fleetReport) print(f *fleet) {
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	fmt.Printf("   load average at end: %s (%s in all)\n\n", loadavg(), time.Since(r.started).Round(time.Second))
	table := func(title string, rows []refresh) {
		fmt.Printf("%s\n\n", title)
		fmt.Println("| refresh | apps | through Argo CD (sandboxed, RuntimeDefault) | slowest app | retries, failed | kptr generate calls: median / max / sum | kptr --sandbox none, no Argo CD | kptr generate peak RSS (max / median) |")
		fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
		direct := map[string]refresh{}
		for _, d := range r.direct {
			direct[d.phase] = d
		}
		for _, c := range rows {
			d := direct[c.phase]
			rss := slices.Clone(c.rssKB)
			sort.Ints(rss)
			mem := "–"
			if len(rss) > 0 {
				mem = fmt.Sprintf("%.0f / %.0f MiB", float64(rss[len(rss)-1])/1024, float64(rss[len(rss)/2])/1024)
			}
			own := slices.Clone(c.kptrSec)
			sort.Float64s(own)
			kp := "none"
			if len(own) > 0 {
				var sum float64
				for _, e := range own {
					sum += e
				}
				kp = fmt.Sprintf("%d: %.2f / %.2f / %.1f s", len(own), own[len(own)/2], own[len(own)-1], sum)
			}
			fmt.Printf("| %s | %d | %s | %s | %d, %d | %s | %s | %s |\n", c.phase, c.apps, sec(c.wall), sec(c.slowest), c.retries, c.failed, kp, sec(d.wall), mem)
		}
		fmt.Println()
	}
	table("Applications annotated manifest-generate-paths: \".\" (the controller asks UpdateRevisionForPaths first; unchanged ones answered from Redis):", r.chain)
	table("Named plugin without discovery (plugin.yaml without discover, every Application names kpt-v1), annotated, the cold commit only, a sidecar of its own with an empty cache:", r.named)
	table("No annotation, the warm commit only (every Application regenerated through a second repo-server and Redis, the same sidecar: kptr replays what it rendered before):", r.chainAll)
	fmt.Printf("functions alone: the whole fleet %s, the changed package %s, the %d bumped packages %s (the binaries on the captured ResourceLists, %d apps at a time)\n",
		sec(r.fns), sec(r.fnsChanged), f.bumped, sec(r.fnsBumped), *fleetConcurrency)
	fmt.Printf("pulls alone: every image the fleet names (%d) into an empty cache: %s\n", len(fleetFns)*len(fleetVersions), sec(f.pulls))
	fmt.Printf("the sidecar's cache after the cold refresh: %.1f MiB for %d images;", float64(f.cacheDu)/(1<<20), len(fleetFns)*3)
	for _, fn := range fleetFns {
		fmt.Printf(" %s %.1f MiB compressed", fn, float64(f.imgBytes[fn])/(1<<20))
	}
	fmt.Println()
	fmt.Printf("the repository each generate receives and extracts into the sidecar's /tmp (.git included): %.1f MiB\n", float64(f.repoDu)/(1<<20))
	phases := func(rows []refresh) map[string]refresh {
		m := map[string]refresh{}
		for _, c := range rows {
			m[c.phase] = c
		}
		return m
	}
	byPhase, allPhase := phases(r.chain), phases(r.chainAll)
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Println("\ngoals:")
	for _, w := range []struct {
		how string
		d   time.Duration
	}{{"annotated", byPhase["warm"].wall}, {"no annotation, every one regenerated", allPhase["warm"].wall}} {
		fmt.Printf("- warm unchanged refresh of all %d ≤ 5 s, %s: %s (%s)\n", len(f.apps), w.how, sec(w.d), verdict(w.d <= 5*time.Second))
	}
	one, alone := byPhase["one changed"].wall, byPhase["one changed, alone"].wall
	fmt.Printf("- one changed package ≤ its own render + 10 %%: %s against %s alone (%s)\n", sec(one), sec(alone), verdict(float64(one) <= 1.1*float64(alone)))
	cold := byPhase["cold"].wall
	bound := time.Duration(1.3 * float64(r.fns+f.pulls))
	fmt.Printf("- cold refresh ≤ 1.3 × (functions alone + pulls) = %s: %s (%s)\n", sec(bound), sec(cold), verdict(cold <= bound))
	if named := phases(r.named)["cold"].wall; named > 0 {
		fmt.Printf("- the same, a named plugin without discovery: %s (%s)\n", sec(named), verdict(named <= bound))
	}
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	fs := strings.Fields(string(b))
	if len(fs) < 3 {
		return "?"
	}
	return strings.Join(fs[:3], " ")
}
