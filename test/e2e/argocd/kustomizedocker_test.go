package argocd

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kptr-dev/kptr/test/kustomizebin"
)

// deploy/variants/kustomize-docker under Debian's podman (root, runc), as a
// kubelet runs the variant's pod: the init container (kptr's image, the
// variant's command and securityContext) copies kptr into the shared
// emptyDir with `kptr install-docker`; then the argocd-repo-server
// container, under Argo CD's own securityContext for it (install.yaml:
// runAsNonRoot as the image's uid 999, readOnlyRootFilesystem, drop ALL,
// no privilege escalation, RuntimeDefault: containerd's profile), with the
// variant's PATH, KPTR_* settings and volumes, runs the copied kptr as
// docker: `docker version`, kustomize's exact `docker run` of a function
// image, and kustomize itself (`kustomize build --enable-alpha-plugins`)
// finding docker on that PATH. Argo CD's image cannot be fetched here, so
// kptr's image stands in for it: the container brings nothing of its own
// to the test but its uid 999 and an empty read-only root; kustomize is
// mounted in, the functions come from the volume. The function images are
// imported into the cache volume first and the container has no network.
func TestKustomizeDockerVariantUnderPodman(t *testing.T) {
	p := newPodman(t, "kptr-podman-kustomize-")
	base, run, ref := p.base, p.run, p.ref
	runtimeDefault := filepath.Join(root, "test/e2e/argocd/testdata/runtime-default/containerd-docker-default.json")

	// The variant's init container and its securityContext.
	variant, err := yaml.ReadFile(filepath.Join(root, "deploy/variants/kustomize-docker/repo-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checkContainerSecurityContext(t, "deploy/variants/kustomize-docker/repo-server.yaml", variant, "initContainers", "kptr-docker", map[string]string{
		"runAsNonRoot": "true", "runAsUser": "999", "runAsGroup": "999", "readOnlyRootFilesystem": "true",
		"allowPrivilegeEscalation": "false", "capabilities.drop": "[ALL]", "seccompProfile.type": "RuntimeDefault",
	})
	initCommand := stringList(t, variant, "initContainers", "kptr-docker", "command")
	const binMount = "/usr/local/kptr/bin"
	if len(initCommand) != 3 || initCommand[1] != "install-docker" || initCommand[2] != binMount {
		t.Fatalf("the variant's init command is %q, want [kptr install-docker %s]", initCommand, binMount)
	}
	// Argo CD's own securityContext for the repo-server container.
	checkContainerSecurityContext(t, "deploy/testdata/argocd-v3.6.1/install.yaml", argoRepoServer(t), "containers", "argocd-repo-server", map[string]string{
		"runAsNonRoot": "true", "readOnlyRootFilesystem": "true", "allowPrivilegeEscalation": "false",
		"capabilities.drop": "[ALL]", "seccompProfile.type": "RuntimeDefault",
	})
	// Both, as podman flags (uid 999: the variant's runAsUser, and the
	// user of Argo CD's image that runAsNonRoot takes).
	confined := []string{"run", "--rm", "--user", "999:999", "--cap-drop=all", "--security-opt", "no-new-privileges",
		"--read-only", "--security-opt", "seccomp=" + runtimeDefault, "--network", "none"}

	// The init container: kptr copies itself into the emptyDir.
	binDir := ownedDir(t, filepath.Join(base, "kptr-docker-bin"))
	args := append(append(append([]string{}, confined...), "-v", binDir+":"+binMount, "--entrypoint", initCommand[0], ref), initCommand[1:]...)
	if out, errs, code := run(args...); code != 0 {
		t.Fatalf("the init container (%s): exit %d\n%s%s", strings.Join(initCommand, " "), code, out, errs)
	}
	want, _ := os.ReadFile(staticKptr(t))
	if got, err := os.ReadFile(filepath.Join(binDir, "kptr")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the init container did not copy kptr into the volume: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(binDir, "docker")); err != nil || l != "kptr" {
		t.Fatalf("docker in the volume: %q, %v; want a link to kptr", l, err)
	}

	// The repo-server container: the variant's env and volumes, Argo CD's
	// /tmp emptyDir, kustomize (static) where Argo CD's image has it.
	env := containerEnv(t, variant, "argocd-repo-server")
	for _, k := range []string{"PATH", "KPTR_CACHE_DIR", "KPTR_ALLOWED_IMAGES"} {
		if env[k] == "" {
			t.Fatalf("the variant sets no %s for argocd-repo-server", k)
		}
	}
	if !strings.HasPrefix(env["PATH"], binMount+":") {
		t.Fatalf("the variant's PATH %q does not start with %s", env["PATH"], binMount)
	}
	cacheVolume := ownedDir(t, filepath.Join(base, "kptr-docker-cache"))
	images := filepath.Join(base, "images")
	goCmd(t, nil, "run", "./examples/build-images", "-out", images)
	chmodTree(t, images)
	app := filepath.Join(base, "app")
	writeVariantApp(t, app)
	chmodTree(t, app)
	repoServer := func(extra ...string) []string {
		a := append(append([]string{}, confined...), "--tmpfs", "/tmp",
			"-v", binDir+":"+binMount+":ro", "-v", cacheVolume+":/home/argocd/.cache",
			"-v", kustomizebin.Path(t)+":/usr/local/bin/kustomize:ro", "-v", app+":/app:ro", "-w", "/app",
			"-e", "KPTR_OFFLINE=1", "-e", "KPTR_PROGRESS=none")
		for _, k := range []string{"PATH", "KPTR_CACHE_DIR", "KPTR_ALLOWED_IMAGES"} {
			a = append(a, "-e", k+"="+env[k])
		}
		return append(a, extra...)
	}
	if _, errs, code := run(append(repoServer("-v", images+":/images:ro", "--entrypoint", "kptr", ref), "cache", "import", "/images")...); code != 0 {
		t.Fatalf("kptr cache import into the cache volume: exit %d: %s", code, errs)
	}

	t.Run("kptr doctor: the landlock tier", func(t *testing.T) {
		out, errs, code := run(append(repoServer("--entrypoint", "kptr", ref), "doctor")...)
		if report := out + errs; code != 0 || !regexp.MustCompile(`(?m)^tier: landlock\b`).MatchString(report) {
			t.Fatalf("kptr doctor in the repo-server container: exit %d, want tier landlock:\n%s", code, report)
		}
	})
	t.Run("docker version", func(t *testing.T) {
		out, errs, code := run(append(repoServer("--entrypoint", "docker", ref), "version", "--format", "{{.Client.Version}}")...)
		if code != 0 || strings.TrimSpace(out) != "24.0.0+kptr" {
			t.Fatalf("docker version: exit %d, %q %s", code, out, errs)
		}
	})
	t.Run("docker run of a function image", func(t *testing.T) {
		in := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: settings\n" +
			"functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: labels\n  data:\n    tier: web\n"
		// kustomize v5.8's command line for a containerized function
		args := append(repoServer("-i", "--entrypoint", "docker", ref), "run", "--rm", "-i", "-a", "STDIN", "-a", "STDOUT", "-a", "STDERR",
			"--network", "none", "--user", "nobody", "--security-opt=no-new-privileges", "gcr.io/kpt-fn/set-labels:v0.1.5")
		out, errs, code := p.runStdin(in, args...)
		if code != 0 || !strings.Contains(out, "tier: web") {
			t.Fatalf("docker run set-labels: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
	})
	t.Run("kustomize build --enable-alpha-plugins", func(t *testing.T) {
		out, errs, code := run(append(repoServer("--entrypoint", "kustomize", ref), "build", "--enable-alpha-plugins", "shop")...)
		if code != 0 || !strings.Contains(out, "tier: web") || !strings.Contains(out, "owner: platform") {
			t.Fatalf("kustomize build: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
		// a bind mount: the landlock tier has no mount namespace
		out, errs, code = run(append(repoServer("--entrypoint", "kustomize", ref), "build", "--enable-alpha-plugins", "mount")...)
		if code == 0 || out != "" || strings.Count(errs, "kptr (docker): ") != 1 || !strings.Contains(errs, "run --mount needs kptr's namespace tier; here kptr runs its landlock tier") || !strings.Contains(errs, "exit status 125") {
			t.Fatalf("kustomize build of a bind mount: exit %d, want kptr's one line and exit status 125\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
	})
}

// writeVariantApp writes two kustomizations of the demo's function images:
// shop (labels and annotations) and mount (a bind mount of data/).
func writeVariantApp(t *testing.T, dir string) {
	t.Helper()
	fn := func(name, image, data, mounts string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations:\n    config.kubernetes.io/function: |\n" +
			"      container:\n        image: " + image + "\n" + mounts + "data:\n" + data
	}
	files := map[string]string{
		"shop/kustomization.yaml":  "resources:\n- configmap.yaml\ntransformers:\n- labels.yaml\n- annotations.yaml\n",
		"shop/configmap.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
		"shop/labels.yaml":         fn("labels", "gcr.io/kpt-fn/set-labels:v0.1.5", "  tier: web\n", ""),
		"shop/annotations.yaml":    fn("annotations", "gcr.io/kpt-fn/set-annotations:v0.1.4", "  owner: platform\n", ""),
		"mount/kustomization.yaml": "resources:\n- configmap.yaml\ntransformers:\n- labels.yaml\n",
		"mount/configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
		"mount/labels.yaml": fn("labels", "gcr.io/kpt-fn/set-labels:v0.1.5", "  tier: web\n",
			"        mounts:\n        - type: bind\n          src: data\n          dst: /data\n"),
		"mount/data/greeting.txt": "hello",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// argoRepoServer is the argocd-repo-server Deployment of Argo CD's own
// install.yaml (deploy/testdata), the manifest the variant patches.
func argoRepoServer(t *testing.T) *yaml.RNode {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "deploy/testdata/argocd-v3.6.1/install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, err := (&kio.ByteReader{Reader: f}).Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.GetKind() == "Deployment" && d.GetName() == "argocd-repo-server" {
			return d
		}
	}
	t.Fatal("install.yaml has no argocd-repo-server Deployment")
	return nil
}

// stringList is the string list field of container name in doc's list.
func stringList(t *testing.T, doc *yaml.RNode, list, name, field string) []string {
	t.Helper()
	n, err := doc.Pipe(yaml.Lookup("spec", "template", "spec", list, "[name="+name+"]", field))
	if err != nil || n == nil {
		t.Fatalf("no %s for the %s container: %v", field, name, err)
	}
	var out []string
	for _, e := range n.Content() {
		out = append(out, e.Value)
	}
	return out
}

// containerEnv is the env (name → value) of the variant's container name.
func containerEnv(t *testing.T, doc *yaml.RNode, name string) map[string]string {
	t.Helper()
	n, err := doc.Pipe(yaml.Lookup("spec", "template", "spec", "containers", "[name="+name+"]", "env"))
	if err != nil || n == nil {
		t.Fatalf("no env for the %s container: %v", name, err)
	}
	env := map[string]string{}
	elems, _ := n.Elements()
	for _, e := range elems {
		env[yaml.GetValue(e.Field("name").Value)] = yaml.GetValue(e.Field("value").Value)
	}
	return env
}
