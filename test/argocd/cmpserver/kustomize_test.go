// End-to-end test of kptr as the docker of Argo CD's built-in kustomize
// (deploy/variants/kustomize-docker, docs/docker.md), no plugin involved:
// the real argocd-repo-server runs as the variant runs it (uid 999, no
// capabilities, no_new_privs, containerd's RuntimeDefault seccomp profile
// loaded by test/e2e/argocd/seccompexec), with the real kustomize on its
// PATH and kptr there as docker (`kptr install-docker`, the init
// container's step) and no other container CLI. The test plays the
// application controller: GenerateManifest with the kustomize build
// options argocd-cm sets (--enable-alpha-plugins), for a kustomization
// whose transformers, generator and validator are containerized KRM
// functions. kptr runs them in its landlock tier (RuntimeDefault refuses
// user namespaces), and the manifests must be what the same function
// binaries give through kustomize's exec functions; a function with a bind
// mount must fail the render with kptr's line (the landlock tier has no
// mount namespace), never give empty manifests.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube"
	repoapi "github.com/argoproj/argo-cd/v3/reposerver/apiclient"
	utiltls "github.com/argoproj/argo-cd/v3/util/tls"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/yaml"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/kustomizebin"
	"github.com/kptr-dev/kptr/test/registry"
)

// kustomizeFunctions are the fixture functions the kustomizations run.
var kustomizeFunctions = []string{"set-labels", "set-annotations", "generator", "validate-resources", "kptr-fx"}

// runtimeDefaultProfile is containerd's default seccomp profile, what a pod
// with seccompProfile RuntimeDefault (Argo CD's own setting for the
// repo-server) gets on containerd.
var runtimeDefaultProfile = filepath.Join(repoRoot, "test/e2e/argocd/testdata/runtime-default/containerd-docker-default.json")

func TestArgoCDBuiltInKustomize(t *testing.T) {
	buildOptions := variantBuildOptions(t)
	reg := registry.Start(t)
	images := map[string]string{}
	for _, f := range kustomizeFunctions {
		images[f] = reg.Addr + "/fn/" + f + ":v1"
		fnimage.Push(t, fnimage.Build(t, f, fnimage.WithMountPoints()), images[f])
	}
	kustomize := kustomizebin.Path(t)

	// The repository: apps/shop (two transformers, a generator, a
	// validator) and apps/mount (a transformer reading a file of the
	// repository through a bind mount).
	work := filepath.Join(t.TempDir(), "apps")
	writeKustomizeApp(t, filepath.Join(work, "apps", "shop"), filepath.Join(work, "apps", "mount"), images, nil)
	// The same kustomizations with the fixture binaries as exec functions.
	execDir := t.TempDir()
	binaries := map[string]string{}
	for _, f := range kustomizeFunctions {
		binaries[f] = fnimage.Binary(t, f)
	}
	writeKustomizeApp(t, filepath.Join(execDir, "shop"), filepath.Join(execDir, "mount"), nil, binaries)
	want := kustomizeBuild(t, kustomize, os.Environ(), filepath.Join(execDir, "shop"), "--enable-alpha-plugins", "--enable-exec")
	for _, s := range []string{`"tier":"web"`, `"owner":"platform"`, `"name":"generated-0"`, `"name":"generated-1"`} {
		if !strings.Contains(strings.Join(want, "\n"), s) {
			t.Fatalf("the exec rendering lacks %s (the comparison would prove nothing):\n%s", s, strings.Join(want, "\n"))
		}
	}

	c := startKustomizeRepoServer(t, work, kustomize, map[string]string{"KPTR_ALLOWED_IMAGES": reg.Addr + "/fn/*"})
	ctx := context.Background()
	request := func(app, path string) *repoapi.ManifestRequest {
		q := c.request(app, c.source(path, nil))
		q.KustomizeOptions.BuildOptions = buildOptions
		return q
	}

	t.Run("containerized functions through GenerateManifest", func(t *testing.T) {
		before := manifestGets(reg)
		r, err := c.generate(ctx, request("shop", "apps/shop"))
		if err != nil {
			t.Fatalf("GenerateManifest: %v", err)
		}
		if r.SourceType != "Kustomize" {
			t.Errorf("apps/shop rendered as %q, want Kustomize (the built-in kustomize, no plugin)", r.SourceType)
		}
		got := untracked(t, "shop", r.Manifests)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the repo-server's manifests differ from kustomize's exec functions':\n--- repo-server\n%s\n--- exec\n%s\nrepo-server log:\n%s",
				strings.Join(got, "\n"), strings.Join(want, "\n"), c.log.String())
		}
		// kptr pulled each image itself (the repo-server has no daemon)
		if after := manifestGets(reg); after <= before {
			t.Errorf("no manifest fetched from the registry (%d before, %d after): the functions did not run through kptr", before, after)
		}
	})

	t.Run("a bind mount is refused in the landlock tier", func(t *testing.T) {
		r, err := c.generate(ctx, request("mount", "apps/mount"))
		if err == nil {
			t.Fatalf("a kustomization with a bind mount rendered under RuntimeDefault: %v", r.Manifests)
		}
		msg := status.Convert(err).Message()
		t.Logf("the UI shows: %s", msg)
		for _, w := range []string{"kptr (docker): ", "run --mount needs kptr's namespace tier", "has no mount namespace", "exit status 125"} {
			if !strings.Contains(msg, w) {
				t.Errorf("the repo-server's error does not contain %q:\n%s", w, msg)
			}
		}
		if strings.Contains(msg, "kpt fn eval") {
			t.Errorf("the error names a kpt command nobody ran:\n%s", msg)
		}
		// The same kustomization renders as root outside RuntimeDefault,
		// where kptr has its namespace tier: the refusal above is the
		// tier's, not the kustomization's.
		if os.Geteuid() == 0 {
			env := append(os.Environ(), "PATH="+c.bin+":"+os.Getenv("PATH"), "KPTR_CACHE_DIR="+t.TempDir(), "KPTR_PROGRESS=none", "HOME="+t.TempDir())
			out := kustomizeBuild(t, kustomize, env, filepath.Join(work, "apps", "mount"), "--enable-alpha-plugins")
			if !strings.Contains(strings.Join(out, "\n"), `"greeting":"hello from the repository"`) {
				t.Errorf("the bind mount kustomization as root (namespace tier) does not read the file:\n%s", strings.Join(out, "\n"))
			}
		}
	})
}

// variantBuildOptions is argocd-cm's kustomize.buildOptions as
// deploy/variants/kustomize-docker sets it.
func variantBuildOptions(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/variants/kustomize-docker/argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	opts := cm.Data["kustomize.buildOptions"]
	if !strings.Contains(opts, "--enable-alpha-plugins") {
		t.Fatalf("the variant's argocd-cm sets kustomize.buildOptions %q, without --enable-alpha-plugins", opts)
	}
	return opts
}

// manifestGets counts the image manifests the registry served.
func manifestGets(reg *registry.Registry) int {
	n := 0
	for _, req := range reg.Requests() {
		if f := strings.Fields(req); f[0] == "GET" && strings.Contains(f[1], "/manifests/") && f[2] == "200" {
			n++
		}
	}
	return n
}

// writeKustomizeApp writes the two kustomizations: at shop, two
// transformers, a generator and a validator; at mount, a transformer that
// reads data/greeting.txt through a bind mount at /var. With images the
// functions are containers, with binaries exec functions.
func writeKustomizeApp(t testing.TB, shop, mount string, images, binaries map[string]string) {
	t.Helper()
	readPath := "/var/greeting.txt"
	if images == nil {
		readPath = filepath.Join(mount, "data", "greeting.txt")
	}
	fn := func(name, f, data, mounts string) string {
		spec := "      exec:\n        path: " + binaries[f] + "\n"
		if images != nil {
			spec = "      container:\n        image: " + images[f] + "\n" + mounts
		}
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations:\n    config.kubernetes.io/function: |\n" + spec + "data:\n" + data
	}
	write(t, shop, map[string]string{
		"kustomization.yaml": "resources:\n- deployment.yaml\n- configmap.yaml\ntransformers:\n- labels.yaml\n- annotations.yaml\ngenerators:\n- generator.yaml\nvalidators:\n- validator.yaml\n",
		"deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n",
		"configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
		"labels.yaml":        fn("labels", "set-labels", "  tier: web\n  team: shop\n", ""),
		"annotations.yaml":   fn("annotations", "set-annotations", "  owner: platform\n", ""),
		"generator.yaml":     fn("generated", "generator", "  name: generated\n  count: \"2\"\n", ""),
		"validator.yaml":     fn("validate", "validate-resources", "  require-labels: tier\n", ""),
	})
	write(t, mount, map[string]string{
		"kustomization.yaml": "resources:\n- configmap.yaml\ntransformers:\n- readfile.yaml\n",
		"configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
		"readfile.yaml": fn("readfile", "kptr-fx", "  op: readfile\n  path: "+readPath+"\n  key: greeting\n",
			"        mounts:\n        - type: bind\n          src: data\n          dst: /var\n"),
		"data/greeting.txt": "hello from the repository",
	})
}

// kustomizeBuild runs kustomize build dir directly and returns its
// resources as the repo-server would (split, as JSON), sorted.
func kustomizeBuild(t testing.TB, kustomize string, env []string, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(kustomize, append([]string{"build", dir}, args...)...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s %v: %v\n%s", dir, args, err, stderr.String())
	}
	objs, err := kube.SplitYAML(out)
	if err != nil {
		t.Fatal(err)
	}
	var res []string
	for _, o := range objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, string(b))
	}
	sort.Strings(res)
	return res
}

// untracked checks the repo-server's tracking annotation on each manifest
// and returns them without it, re-encoded and sorted as kustomizeBuild's.
func untracked(t testing.TB, app string, manifests []string) []string {
	t.Helper()
	var res []string
	for _, m := range decode(t, manifests) {
		meta, _ := m["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		if id, _ := ann["argocd.argoproj.io/tracking-id"].(string); !strings.HasPrefix(id, app+":") {
			t.Errorf("%v: tracking id %q, want %s:…", meta["name"], id, app)
		}
		delete(ann, "argocd.argoproj.io/tracking-id")
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
		b, _ := json.Marshal(m)
		res = append(res, string(b))
	}
	sort.Strings(res)
	return res
}

// kustomizeChain is a chain without a plugin sidecar: the repo-server
// renders with its built-in kustomize.
type kustomizeChain struct {
	*chain
	bin string // the repo-server's PATH directory with kustomize and kptr as docker
}

// startKustomizeRepoServer starts Redis, the Git server and
// argocd-repo-server as deploy/variants/kustomize-docker runs it: uid 999
// (when the test runs as root), no capabilities, no_new_privs, under
// containerd's RuntimeDefault profile; on its PATH first a directory that
// `kptr install-docker` filled (kptr, docker → kptr), then one with
// kustomize and the only other program the repo-server runs (git): no
// other container CLI. operatorEnv is the variant's KPTR_* settings.
func startKustomizeRepoServer(t testing.TB, work, kustomize string, operatorEnv map[string]string) *kustomizeChain {
	t.Helper()
	repoURL, rev := gitServe(t, work)
	redisPort := freePort(t)
	daemon(t, "redis-server", redisPort, nil, "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(redisPort),
		"--save", "", "--appendonly", "no", "--protected-mode", "yes")
	base, err := os.MkdirTemp("", "kptr-reposerver-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	seccompexec := buildSeccompExec(t, base)
	// the init container's copy, as uid 999 into the shared volume
	kptrBin := mkdir(t, filepath.Join(base, "kptr-bin"), 0o755)
	install := asRepoServer(kptrBinary(t), "install-docker", kptrBin)
	if out, err := exec.Command(install[0], install[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("kptr install-docker: %v\n%s", err, out)
	}
	tools := readOnlyDir(t, filepath.Join(base, "bin"))
	repoServer := filepath.Join(tools, "argocd-repo-server")
	copyFile(t, argocdBinary(t), repoServer, 0o755)
	copyFile(t, kustomize, filepath.Join(tools, "kustomize"), 0o755)
	copyFile(t, filepath.Join(argocdSource(t), "hack", "git-verify-wrapper.sh"), filepath.Join(tools, "git-verify-wrapper.sh"), 0o755)
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(git, filepath.Join(tools, "git")); err != nil {
		t.Fatal(err)
	}
	path := kptrBin + ":" + tools
	for _, cli := range []string{"docker", "podman", "nerdctl"} {
		p, err := lookPathIn(cli, path)
		if cli == "docker" {
			if real, _ := filepath.EvalSymlinks(p); err != nil || real != filepath.Join(kptrBin, "kptr") {
				t.Fatalf("docker on the repo-server's PATH is %q (%v), not kptr", p, err)
			}
		} else if err == nil {
			t.Fatalf("the repo-server's PATH has another container CLI: %s", p)
		}
	}
	env := []string{
		"PATH=" + path,
		"HOME=" + mkdir(t, filepath.Join(base, "home"), 0o700),
		"TMPDIR=" + mkdir(t, filepath.Join(base, "tmp"), 0o700),                       // checkouts: $TMPDIR/_argocd-repo
		"ARGOCD_PLUGINSOCKFILEPATH=" + readOnlyDir(t, filepath.Join(base, "plugins")), // no plugin
		"ARGOCD_GPG_ENABLED=false",
		// its git credential socket, by default /tmp's, where another
		// repo-server (root's, in the chain test) may hold it
		"ARGOCD_ASK_PASS_SOCK=" + filepath.Join(base, "tmp", "reposerver-ask-pass.sock"),
		"KPTR_CACHE_DIR=" + mkdir(t, filepath.Join(base, "cache"), 0o700),
		"KPTR_PROGRESS=none",
	}
	for k, v := range operatorEnv {
		env = append(env, k+"="+v)
	}
	port, metrics := freePort(t), freePort(t)
	argv := asRepoServer(seccompexec, runtimeDefaultProfile, repoServer, "--address", "127.0.0.1", "--port", strconv.Itoa(port),
		"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(metrics),
		"--redis", fmt.Sprintf("127.0.0.1:%d", redisPort), "--disable-tls", "--client-ca-path=", "--logformat", "text", "--loglevel", "info")
	log := daemon(t, "argocd-repo-server", port, env, argv...)
	pid := pidOf(t, repoServer)
	if os.Geteuid() == 0 {
		checkConfined(t, pid)
	}
	if s := procStatus(t, pid, "Seccomp"); s != "2" {
		t.Fatalf("argocd-repo-server runs with Seccomp: %s, want 2 (a filter)", s)
	}
	conn, err := repoapi.NewConnection(fmt.Sprintf("127.0.0.1:%d", port), 120, &utiltls.Configuration{DisableTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &kustomizeChain{chain: &chain{repo: repoapi.NewRepoServerServiceClient(conn), url: repoURL, rev: rev, log: log}, bin: kptrBin}
}

// asRepoServer is argv run as the repo-server's user: uid/gid 999 without
// capabilities and with no_new_privs when the test runs as root, else as
// the test's own user.
func asRepoServer(argv ...string) []string {
	if os.Geteuid() != 0 {
		return argv
	}
	return append([]string{"setpriv", "--reuid", strconv.Itoa(pluginUID), "--regid", strconv.Itoa(pluginUID), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}, argv...)
}

// buildSeccompExec builds test/e2e/argocd/seccompexec (cgo, libseccomp)
// into dir.
func buildSeccompExec(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "seccompexec")
	cmd := exec.Command("go", "build", "-o", out, "./test/e2e/argocd/seccompexec")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build seccompexec: %v\n%s", err, b)
	}
	return out
}

// lookPathIn is exec.LookPath with path as PATH.
func lookPathIn(name, path string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// pidOf is the process running the executable exe (waiting up to 10 s
// for setpriv and seccompexec to have exec'd it).
func pidOf(t testing.TB, exe string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			if l, err := os.Readlink(d + "/exe"); err == nil && l == exe {
				pid, _ := strconv.Atoi(filepath.Base(d))
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process runs %s", exe)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// procStatus is the value of field in /proc/PID/status.
func procStatus(t testing.TB, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
