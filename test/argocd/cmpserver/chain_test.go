// End-to-end test of kptr behind the real Argo CD chain: argocd-repo-server
// (with Redis, Debian's redis-server, on loopback) in front of
// argocd-cmp-server running the repository's plugin.yaml as uid 999 without
// capabilities, the two sharing the plugins socket directory as the pod does,
// and the example applications in a Git repository served by `git daemon`
// on loopback. The test plays the application controller: it sends the
// repo-server the ManifestRequest and app-details query the controller and
// the API server send, and checks what a user of the Argo CD UI would see.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	repoapi "github.com/argoproj/argo-cd/v3/reposerver/apiclient"
	utiltls "github.com/argoproj/argo-cd/v3/util/tls"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/yaml"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/kustomizebin"
)

// chain is a running repo-server with kptr's sidecar behind it.
type chain struct {
	sidecar *server
	repo    repoapi.RepoServerServiceClient
	url     string // the Git repository as Applications name it
	rev     string // its main branch's commit, as the controller resolves it
	log     *syncBuffer
}

// freePort returns a loopback port nobody listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// daemon starts argv with env (nil: ours) and waits until it accepts
// connections on 127.0.0.1:port; it is stopped (SIGTERM, then SIGKILL) when
// the test ends, and its output is logged if the test failed.
func daemon(t testing.TB, name string, port int, env []string, argv ...string) *syncBuffer {
	t.Helper()
	log := &syncBuffer{}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return log
		}
		select {
		case <-done:
			t.Fatalf("%s exited:\n%s", name, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %d after 30s:\n%s", name, port, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func runIn(t testing.TB, dir string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=kptr", "GIT_AUTHOR_EMAIL=kptr@example.com",
		"GIT_COMMITTER_NAME=kptr", "GIT_COMMITTER_EMAIL=kptr@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitServe commits the tree at work (its fake .git replaced by a real one)
// on branch main and serves it with git daemon; it returns the URL and commit.
func gitServe(t testing.TB, work string) (repoURL, rev string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(work, ".git")); err != nil {
		t.Fatal(err)
	}
	runIn(t, work, "git", "init", "-q", "-b", "main")
	runIn(t, work, "git", "add", "-A")
	runIn(t, work, "git", "commit", "-q", "-m", "apps")
	rev = runIn(t, work, "git", "rev-parse", "HEAD")
	port := freePort(t)
	daemon(t, "git daemon", port, nil, "git", "daemon", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--export-all", "--base-path="+filepath.Dir(work), filepath.Dir(work))
	return fmt.Sprintf("git://127.0.0.1:%d/%s", port, filepath.Base(work)), rev
}

// startChain starts Redis, the Git server, the sidecar (startServer) and
// argocd-repo-server pointed at the sidecar's socket directory.
func startChain(t testing.TB, f *fns, work string, operatorEnv map[string]string) *chain {
	t.Helper()
	repoURL, rev := gitServe(t, work)
	return startRepoServer(t, startServer(t, operatorEnv), startRedis(t), repoURL, rev)
}

// startRedis starts the Redis the repo-server caches manifests in (one for
// every replica, as in an HA install) and returns its address.
func startRedis(t testing.TB) string {
	t.Helper()
	port := freePort(t)
	daemon(t, "redis-server", port, nil, "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--protected-mode", "yes")
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// startRepoServer starts argocd-repo-server with its own checkouts and the
// sidecar s behind it, caching in the Redis at redis: one replica of the
// repo-server pod. env adds to the repo-server's environment (its
// ARGOCD_REPO_SERVER_* settings).
func startRepoServer(t testing.TB, s *server, redis, repoURL, rev string, env ...string) *chain {
	t.Helper()
	base := t.TempDir()
	port, metrics := freePort(t), freePort(t)
	bin := filepath.Join(base, "argocd-repo-server")
	copyFile(t, argocdBinary(t), bin, 0o755)
	// On the repo-server's PATH in Argo CD's image (its Dockerfile copies it
	// from hack/): the repo-server runs it on every checkout.
	copyFile(t, filepath.Join(argocdSource(t), "hack", "git-verify-wrapper.sh"), filepath.Join(base, "git-verify-wrapper.sh"), 0o755)
	for _, d := range []string{"tmp", "home"} {
		os.Mkdir(filepath.Join(base, d), 0o700)
	}
	env = append([]string{
		"PATH=" + base + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + filepath.Join(base, "home"),
		"TMPDIR=" + filepath.Join(base, "tmp"), // checkouts: $TMPDIR/_argocd-repo
		"ARGOCD_PLUGINSOCKFILEPATH=" + filepath.Dir(s.sock),
		"ARGOCD_GPG_ENABLED=false",
	}, env...)
	log := daemon(t, "argocd-repo-server", port, env, bin, "--address", "127.0.0.1", "--port", strconv.Itoa(port),
		"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(metrics),
		"--redis", redis, "--disable-tls", "--client-ca-path=", "--logformat", "text", "--loglevel", "info")
	// The controller's connection: its 60 s default timeout, its retries.
	conn, err := repoapi.NewConnection(fmt.Sprintf("127.0.0.1:%d", port), 60, &utiltls.Configuration{DisableTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &chain{sidecar: s, repo: repoapi.NewRepoServerServiceClient(conn), url: repoURL, rev: rev, log: log}
}

// source is an Application's spec.source; plugin nil leaves the choice to
// discovery, as an Application without a plugin section does.
func (c *chain) source(path string, plugin *v1alpha1.ApplicationSourcePlugin) *v1alpha1.ApplicationSource {
	return &v1alpha1.ApplicationSource{RepoURL: c.url, Path: path, TargetRevision: "main", Plugin: plugin}
}

// request is the ManifestRequest the application controller sends
// (controller/state.go) for Application app in the control-plane namespace.
func (c *chain) request(app string, src *v1alpha1.ApplicationSource) *repoapi.ManifestRequest {
	return &repoapi.ManifestRequest{
		Repo:               &v1alpha1.Repository{Repo: c.url},
		Revision:           c.rev,
		AppLabelKey:        "app.kubernetes.io/instance",
		AppName:            app,
		Namespace:          "ns-" + app,
		ApplicationSource:  src,
		KustomizeOptions:   &v1alpha1.KustomizeOptions{},
		KubeVersion:        "1.34.0",
		ApiVersions:        []string{"v1", "apps/v1"},
		TrackingMethod:     "annotation",
		HelmOptions:        &v1alpha1.HelmOptions{},
		ProjectName:        "default",
		ProjectSourceRepos: []string{"*"},
	}
}

func (c *chain) generate(ctx context.Context, q *repoapi.ManifestRequest) (*repoapi.ManifestResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
	}
	return c.repo.GenerateManifest(ctx, q)
}

func kptPlugin(params ...v1alpha1.ApplicationSourcePluginParameter) *v1alpha1.ApplicationSourcePlugin {
	return &v1alpha1.ApplicationSourcePlugin{Name: "kpt-v1", Parameters: params}
}

func stringParam(name, value string) v1alpha1.ApplicationSourcePluginParameter {
	return v1alpha1.ApplicationSourcePluginParameter{Name: name, String_: &value}
}

// chainRepository is repository() plus the apps only the chain test uses.
func chainRepository(t testing.TB, f *fns, slow string) string {
	work := filepath.Join(t.TempDir(), "apps")
	if err := os.Rename(repository(t, f), work); err != nil {
		t.Fatal(err)
	}
	write(t, work, map[string]string{
		// A function that fails after another printed resources: nothing
		// that reached kptr's stdout may reach the message.
		"apps/leaky/Kptfile": `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: leaky
pipeline:
  mutators:
  - image: ` + f.labels + `
    configMap:
      canary: stdout-canary-3f9a
  - image: ` + f.fx + `
    configMap:
      op: crash
      code: "3"
      message: "quota exceeded for namespace payments"
`,
		"apps/leaky/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stdout-canary-3f9a\ndata:\n  secret: stdout-canary-3f9a\n",
		"apps/unrendered/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: unrendered\npipeline:\n  mutators:\n  - image: " + f.reg.Addr + "/fn/never-pulled:v1\n  validators:\n  - image: " + f.reg.Addr + "/other/fn:v1\n",
		"apps/slow/Kptfile":       "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: slow\npipeline:\n  mutators:\n  - image: " + slow + "\n",
		"apps/slow/cm.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	return work
}

func TestArgoCDRepoServerChain(t *testing.T) {
	f := pushFunctions(t)
	slow := f.reg.Addr + "/fn/sleep:v1"
	fnimage.Push(t, fnimage.Build(t, "", fnimage.WithEntrypoint("/bin/sleep", "271")), slow)
	t.Cleanup(killSleepers)
	c := startChain(t, f, chainRepository(t, f, slow), map[string]string{"KPTR_ALLOWED_IMAGES": f.allowed})
	ctx := context.Background()

	// First, on the cold image cache: eight Applications at once.
	t.Run("eight applications on a cold cache", func(t *testing.T) {
		digests := blobs(t, f.labelsImg, f.annotsImg)
		before := map[string]int{}
		for _, d := range digests {
			before[d] = f.reg.BlobGets(d)
		}
		const n = 8
		resps := make([]*repoapi.ManifestResponse, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resps[i], errs[i] = c.generate(ctx, c.request(fmt.Sprintf("echo-%d", i), c.source("apps/echo", nil)))
			}()
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		t.Logf("%d cold renders through the repo-server in %s", n, time.Since(t0).Round(time.Millisecond))
		for i := range n {
			if errs[i] != nil {
				t.Errorf("application %d: %v", i, errs[i])
				continue
			}
			assertTracked(t, fmt.Sprintf("echo-%d", i), resps[i].Manifests, expected(nil))
		}
		for _, d := range digests {
			if got := f.reg.BlobGets(d) - before[d]; got != 1 {
				t.Errorf("blob %s fetched %d times by %d concurrent Applications, want 1", d, got, n)
			}
		}
		if got := c.sidecar.calls("generate"); got != n {
			t.Errorf("kptr generate ran %d times for %d Applications", got, n)
		}
	})

	t.Run("discovery", func(t *testing.T) {
		r, err := c.generate(ctx, c.request("discovered", c.source("apps/echo", nil)))
		if err != nil {
			t.Fatal(err)
		}
		if r.SourceType != "Plugin" {
			t.Errorf("apps/echo (Kptfile) rendered as %q, want Plugin", r.SourceType)
		}
		assertTracked(t, "discovered", r.Manifests, expected(nil))
		calls := c.sidecar.calls("generate")
		r, err = c.generate(ctx, c.request("plain", c.source("apps/plain", nil)))
		if err != nil {
			t.Fatal(err)
		}
		if r.SourceType != "Directory" || len(r.Manifests) != 1 || !strings.Contains(r.Manifests[0], `"plain"`) {
			t.Errorf("apps/plain (no Kptfile) = %s %v, want the Directory source type with its Deployment", r.SourceType, r.Manifests)
		}
		if got := c.sidecar.calls("generate"); got != calls {
			t.Errorf("kptr generate ran for a path without a Kptfile")
		}
	})

	t.Run("manifests, parameter and metadata", func(t *testing.T) {
		r, err := c.generate(ctx, c.request("echo", c.source("apps/echo", kptPlugin(stringParam("annotation-domain", "kptr.dev")))))
		if err != nil {
			t.Fatal(err)
		}
		assertTracked(t, "echo", r.Manifests, expected(map[string]string{
			"kptr.dev/app-name":        "echo",
			"kptr.dev/revision":        c.rev,
			"kptr.dev/repo-url":        c.url,
			"kptr.dev/target-revision": "main",
			"kptr.dev/source-path":     "apps/echo",
		}))
		if r.Revision != c.rev {
			t.Errorf("revision %q, want %q", r.Revision, c.rev)
		}
	})

	t.Run("second identical request from the repo-server's cache", func(t *testing.T) {
		q := c.request("cached", c.source("apps/echo", kptPlugin()))
		if _, err := c.generate(ctx, q); err != nil {
			t.Fatal(err)
		}
		calls := c.sidecar.calls("generate")
		r, err := c.generate(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		assertTracked(t, "cached", r.Manifests, expected(nil))
		if got := c.sidecar.calls("generate"); got != calls {
			t.Errorf("kptr generate ran again (%d times) for an identical request", got-calls)
		}
	})

	t.Run("a failing function as the UI shows it", func(t *testing.T) {
		for _, app := range []string{"failing", "leaky"} {
			r, err := c.generate(ctx, c.request(app, c.source("apps/"+app, nil)))
			if err == nil {
				t.Fatalf("%s: no error; manifests %v", app, r.Manifests)
			}
			msg := status.Convert(err).Message()
			t.Logf("%s: the UI shows: failed to generate manifest for source 1 of 1: %s", app, err)
			want := map[string][]string{
				"failing": {"policy check failed: Deployment echoserver must set resources.limits", "kptr-fx:v1", "exit code 1"},
				"leaky":   {"quota exceeded for namespace payments", "kptr-fx:v1", "exit code 3"},
			}[app]
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: message %q does not contain %q", app, msg, w)
				}
			}
			for _, leak := range []string{"stdout-canary", "_cmp_server", "apiVersion"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%s: message leaks %q: %q", app, leak, msg)
				}
			}
		}
	})

	t.Run("a function over the fn-timeout parameter", func(t *testing.T) {
		t0 := time.Now()
		_, err := c.generate(ctx, c.request("slow-param", c.source("apps/slow", kptPlugin(stringParam("fn-timeout", "2s")))))
		if err == nil {
			t.Fatal("a function past its time limit rendered")
		}
		msg := status.Convert(err).Message()
		t.Logf("after %s the UI shows: %s", time.Since(t0).Round(time.Millisecond), msg)
		for _, w := range []string{"sleep:v1", "2s"} {
			if !strings.Contains(msg, w) {
				t.Errorf("message %q does not contain %q", msg, w)
			}
		}
		waitNoSleepers(t)
	})

	t.Run("a function over Argo CD's deadline", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		t0 := time.Now()
		_, err := c.generate(dctx, c.request("slow", c.source("apps/slow", nil)))
		// Argo CD's cmp-server kills the plugin with SIGKILL at the deadline
		// (less 100 ms; exec.CommandContext), so kptr cannot say anything:
		// the controller gets DeadlineExceeded, or, when the repo-server's
		// answer wins the race, the kill. KPTR_TIMEOUT below the deadline is
		// what gives the UI kptr's own message.
		if status.Code(err) != codes.DeadlineExceeded && !strings.Contains(err.Error(), "`kptr generate` failed signal: killed") {
			t.Fatalf("render past the controller's deadline: %v, want DeadlineExceeded or the kill", err)
		}
		t.Logf("after %s the controller has: %v", time.Since(t0).Round(time.Millisecond), err)
		waitNoSleepers(t)
		// The repo-server logged why, with kptr's message.
		if !strings.Contains(c.log.String(), "kptr generate") {
			t.Logf("repo-server log has no kptr message for the killed render")
		}
	})

	// Every render above pulled through generate's background fetch
	// (chain_fetch_test.go): none may outlive the pulls.
	t.Run("no background fetch left", func(t *testing.T) {
		if p := fetchers(c.sidecar.cache); len(p) > 0 {
			t.Errorf("background fetches still running: %v", p)
		}
		// and none left a zombie or anything else in the sidecar
		c.sidecar.checkNamespaceClean(t)
	})

	t.Run("function announcement", func(t *testing.T) {
		ann := c.appDetails(t, "echo", c.source("apps/echo", kptPlugin()))
		fnsAnn := ann["functions"]
		if fnsAnn == nil {
			t.Fatalf("no functions announcement in %v", ann)
		}
		want := []string{
			f.annots + "@" + digestOf(t, f.annotsImg),
			f.labels + "@" + digestOf(t, f.labelsImg),
		}
		if strings.Join(fnsAnn.Array, "\n") != strings.Join(want, "\n") {
			t.Errorf("announced functions %q, want %q", fnsAnn.Array, want)
		}
		for _, static := range []string{"annotation-domain", "fn-timeout"} {
			if ann[static] == nil {
				t.Errorf("static parameter %s not announced", static)
			}
		}
		// An image never rendered (not cached) and one outside the allow-list.
		ann = c.appDetails(t, "unrendered", c.source("apps/unrendered", nil))
		want = []string{
			f.reg.Addr + "/fn/never-pulled:v1 (not cached: pulled at the first render)",
			f.reg.Addr + "/other/fn:v1 (refused: not in the operator's allow-list)",
		}
		if got := ann["functions"]; got == nil || strings.Join(got.Array, "\n") != strings.Join(want, "\n") {
			t.Errorf("apps/unrendered announced %v, want %q", got, want)
		}
	})
}

// assertTracked checks manifests as the repo-server returns them for app:
// the rendering plus Argo CD's own tracking annotation (annotation tracking),
// which it adds to every resource, checked and then set aside.
func assertTracked(t testing.TB, app string, got []string, want []map[string]any) {
	t.Helper()
	var stripped []string
	for _, m := range decode(t, got) {
		meta, _ := m["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		id, _ := ann["argocd.argoproj.io/tracking-id"].(string)
		if !strings.HasPrefix(id, app+":") {
			t.Errorf("%v: tracking id %q, want %s:…", meta["name"], id, app)
		}
		delete(ann, "argocd.argoproj.io/tracking-id")
		b, _ := json.Marshal(m)
		stripped = append(stripped, string(b))
	}
	assertManifests(t, stripped, want)
}

// appDetails is the API server's app-details query (the UI's parameters
// tab), keyed by announced parameter name.
func (c *chain) appDetails(t *testing.T, app string, src *v1alpha1.ApplicationSource) map[string]*repoapi.ParameterAnnouncement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.repo.GetAppDetails(ctx, &repoapi.RepoServerAppDetailsQuery{
		Repo: &v1alpha1.Repository{Repo: c.url}, Source: src, AppName: app,
		KustomizeOptions: &v1alpha1.KustomizeOptions{}, HelmOptions: &v1alpha1.HelmOptions{}, TrackingMethod: "annotation",
	})
	if err != nil {
		t.Fatalf("GetAppDetails %s: %v", src.Path, err)
	}
	if r.Type != "Plugin" || r.Plugin == nil {
		t.Fatalf("GetAppDetails %s: type %q, plugin %v", src.Path, r.Type, r.Plugin)
	}
	out := map[string]*repoapi.ParameterAnnouncement{}
	for _, p := range r.Plugin.ParametersAnnouncement {
		out[p.Name] = p
	}
	return out
}

func digestOf(t testing.TB, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func waitNoSleepers(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for len(sleepers()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("function processes left behind: %v", sleepers())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killSleepers ends what waitNoSleepers found left behind, so that a failed
// check does not leave processes on the machine.
func killSleepers() {
	for _, pid := range sleepers() {
		if n, err := strconv.Atoi(pid); err == nil {
			syscall.Kill(n, syscall.SIGKILL) // pid 1 of its namespace: only SIGKILL reaches it
		}
	}
}

// fleetVariantPlugin is the plugin.yaml argocd-cmp-server reads in a pod
// of deploy/variants/fleet, as the real kustomize builds the variant on
// Argo CD's install.yaml (deploy/testdata): the ConfigMap mounted at
// pluginPath, or, when nothing is mounted there, the image's copy (the
// repository's plugin.yaml, which deploy/image bakes in).
func fleetVariantPlugin(t testing.TB) string {
	t.Helper()
	const pluginPath = "/home/argocd/cmp-server/config/plugin.yaml"
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(repoRoot, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: argocd\nresources:\n- " +
		rel("deploy/testdata/argocd-v3.6.1") + "\ncomponents:\n- " + rel("deploy/component") + "\n- " + rel("deploy/variants/fleet") + "\n"
	write(t, dir, map[string]string{"kustomization.yaml": k})
	out, err := exec.Command(kustomizebin.Path(t), "build", dir).Output()
	if err != nil {
		t.Fatalf("kustomize build of deploy/variants/fleet: %v", err)
	}
	type container struct {
		Name         string `json:"name"`
		VolumeMounts []struct {
			Name, MountPath, SubPath string
		} `json:"volumeMounts"`
	}
	type object struct {
		Kind     string `json:"kind"`
		Metadata struct{ Name string }
		Data     map[string]string `json:"data"`
		Spec     struct {
			Template struct {
				Spec struct {
					Containers []container `json:"containers"`
					Volumes    []struct {
						Name      string
						ConfigMap *struct{ Name string } `json:"configMap"`
					} `json:"volumes"`
				}
			}
		}
	}
	objs := map[string]object{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("kustomize build output: %v", err)
		}
		objs[o.Kind+"/"+o.Metadata.Name] = o
	}
	d, ok := objs["Deployment/argocd-repo-server"]
	if !ok {
		t.Fatal("kustomize build of deploy/variants/fleet: no argocd-repo-server Deployment")
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "kptr" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath != pluginPath {
				continue
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					if text, ok := objs["ConfigMap/"+v.ConfigMap.Name].Data[m.SubPath]; ok {
						return text
					}
				}
			}
			t.Fatalf("deploy/variants/fleet mounts %s from volume %s, which holds no %s", pluginPath, m.Name, m.SubPath)
		}
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The plugin of deploy/variants/fleet behind the real repo-server: an
// Application that names it (<name>-<version>, the socket's name) renders,
// and the sidecar is never asked whether it matches, which is what sends it
// the whole repository; one that does not name it is not matched and Argo
// CD applies its path as plain YAML, without kptr; a name without the
// version is refused.
func TestArgoCDFleetVariantPlugin(t *testing.T) {
	f := pushFunctions(t)
	text := fleetVariantPlugin(t)
	var plugin struct {
		Metadata struct{ Name string }
		Spec     struct{ Version string }
	}
	if err := yaml.Unmarshal([]byte(text), &plugin); err != nil {
		t.Fatal(err)
	}
	name := plugin.Metadata.Name + "-" + plugin.Spec.Version
	work := filepath.Join(t.TempDir(), "apps")
	if err := os.Rename(repository(t, f), work); err != nil {
		t.Fatal(err)
	}
	repoURL, rev := gitServe(t, work)
	s := startServerWith(t, map[string]string{"KPTR_ALLOWED_IMAGES": f.allowed}, sidecarOptions{plugin: text})
	c := startRepoServer(t, s, startRedis(t), repoURL, rev)
	ctx := context.Background()

	t.Run("named", func(t *testing.T) {
		src := c.source("apps/echo", &v1alpha1.ApplicationSourcePlugin{Name: name})
		r, err := c.generate(ctx, c.request("named", src))
		if err != nil {
			t.Fatal(err)
		}
		if r.SourceType != "Plugin" {
			t.Errorf("apps/echo naming %s rendered as %q, want Plugin", name, r.SourceType)
		}
		assertTracked(t, "named", r.Manifests, expected(nil))
		if got := s.calls("generate"); got != 1 {
			t.Errorf("kptr generate ran %d times, want 1", got)
		}
		// The parameters tab: the plugin's announcements are kept.
		ann := c.appDetails(t, "named", src)
		for _, p := range []string{"annotation-domain", "fn-timeout", "functions"} {
			if ann[p] == nil {
				t.Errorf("parameter %s not announced", p)
			}
		}
	})
	t.Run("unnamed", func(t *testing.T) {
		calls := s.calls("generate")
		r, err := c.generate(ctx, c.request("unnamed", c.source("apps/echo", nil)))
		if err != nil {
			t.Fatal(err)
		}
		if r.SourceType != "Directory" {
			t.Errorf("apps/echo without a plugin name = %q, want Directory (the plugin has no discovery)", r.SourceType)
		}
		if got := s.calls("generate"); got != calls {
			t.Error("kptr generate ran for an Application that does not name the plugin")
		}
		for _, m := range r.Manifests {
			if strings.Contains(m, "app.kubernetes.io/name") {
				t.Errorf("an unnamed Application's manifest is rendered: %s", m)
			}
		}
	})
	t.Run("name without version", func(t *testing.T) {
		calls := s.calls("generate")
		src := c.source("apps/echo", &v1alpha1.ApplicationSourcePlugin{Name: plugin.Metadata.Name})
		_, err := c.generate(ctx, c.request("unversioned", src))
		if want := fmt.Sprintf("could not find cmp-server plugin with name %q", plugin.Metadata.Name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("naming %q: %v, want an error with %q", plugin.Metadata.Name, err, want)
		}
		if got := s.calls("generate"); got != calls {
			t.Error("kptr generate ran for an Application naming the plugin without its version")
		}
	})
	// argocd-cmp-server logs each call's method: generate's is there, a
	// match would be too.
	log := s.log.String()
	if !strings.Contains(log, "grpc.method=GenerateManifest ") {
		t.Error("argocd-cmp-server's log names no GenerateManifest call: cannot tell which calls it served")
	}
	if n := strings.Count(log, "msg=\"started call\" grpc.component=server grpc.method=MatchRepository "); n > 0 {
		t.Errorf("the repo-server asked the sidecar %d times whether the plugin matches (sending it the repository)", n)
	}
}
