package argocd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The sidecar image `make image` builds, loaded into Debian's podman (as
// root, runc) and run as a kubelet runs it from each deploy variant's
// securityContext: uid/gid 999, every capability dropped, no_new_privs, a
// read-only root file system, tmpfs /tmp, the cache volume (an emptyDir,
// here a host directory owned by 999) and the variant's seccomp profile:
// Unconfined, the seccomp-localhost variant's Localhost profile, and for the
// stock component's RuntimeDefault both containerd's and CRI-O's default
// (testdata/runtime-default). kptr is the container's entrypoint (pid 1), the
// demo package (examples/demo, its images imported into the cache volume)
// is mounted read-only. kptr doctor must name the tier that runs, and kptr
// generate must print the same bytes under every variant.
//
// Needs root and podman with runc; CI (CI=true) fails without them, a
// developer's machine skips. The containers.conf is private to the test.
func TestSidecarImageUnderPodman(t *testing.T) {
	p := newPodman(t, "kptr-podman-")
	base, run, ref := p.base, p.run, p.ref

	images := filepath.Join(base, "images")
	goCmd(t, nil, "run", "./examples/build-images", "-out", images)
	chmodTree(t, images)
	cache := ownedDir(t, filepath.Join(base, "cache"))
	profiles := filepath.Join(root, "test/e2e/argocd/testdata/runtime-default")
	localhost := filepath.Join(root, "deploy/variants/seccomp-localhost/profiles/kptr-sandbox.json")

	// The kubelet's translation of the component's securityContext
	// (checked against deploy/ below), the cache emptyDir and the package.
	sidecar := func(seccomp string, extra ...string) []string {
		return append([]string{"run", "--rm", "--user", "999:999", "--cap-drop=all",
			"--security-opt", "no-new-privileges", "--read-only", "--tmpfs", "/tmp",
			"--security-opt", "seccomp=" + seccomp,
			"-v", cache + ":/home/argocd/.cache",
			"-e", "KPTR_OFFLINE=1", "-e", "KPTR_ALLOWED_IMAGES=gcr.io/kpt-fn/*", "-e", "KPTR_PROGRESS=none"}, extra...)
	}
	checkSecurityContext(t, "deploy/component/sidecar.yaml", map[string]string{
		"runAsUser": "999", "runAsGroup": "999", "readOnlyRootFilesystem": "true",
		"allowPrivilegeEscalation": "false", "capabilities.drop": "[ALL]", "seccompProfile.type": "RuntimeDefault",
	})
	checkSecurityContext(t, "deploy/variants/unconfined/security.yaml", map[string]string{"seccompProfile.type": "Unconfined"})
	checkSecurityContext(t, "deploy/variants/seccomp-localhost/security.yaml", map[string]string{
		"seccompProfile.type": "Localhost", "seccompProfile.localhostProfile": "kptr/kptr-sandbox.json",
	})

	if _, errs, code := run(append(sidecar("unconfined", "-v", images+":/images:ro"), ref, "cache", "import", "/images")...); code != 0 {
		t.Fatalf("kptr cache import in the image: exit %d: %s", code, errs)
	}

	var want string
	for _, tc := range []struct{ name, seccomp, tier string }{
		{"unconfined", "unconfined", "namespace"},
		{"seccomp-localhost", localhost, "namespace"},
		// containerd's default refuses user namespaces.
		{"component/RuntimeDefault-containerd", filepath.Join(profiles, "containerd-docker-default.json"), "landlock"},
		// CRI-O's allows them (not sethostname, which kptr does without).
		{"component/RuntimeDefault-crio", filepath.Join(profiles, "crio-containers-common.json"), "namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := run(append(sidecar(tc.seccomp), ref, "doctor")...)
			report := out + errs
			if code != 0 || !strings.Contains(report, "sandbox: usable") || !regexp.MustCompile(`(?m)^tier: `+tc.tier+`\b`).MatchString(report) {
				t.Fatalf("kptr doctor: exit %d, want usable, tier %s:\n%s", code, tc.tier, report)
			}
			gen, errs, code := run(append(sidecar(tc.seccomp, "-v", filepath.Join(root, "examples/demo")+":/pkg:ro", "-w", "/pkg"), ref, "generate")...)
			if code != 0 || !strings.Contains(gen, "demo.kptr.dev/rollout: canary") {
				t.Fatalf("kptr generate: exit %d: %s\n%s", code, errs, gen)
			}
			if want == "" {
				want = gen
			} else if gen != want {
				t.Errorf("generate differs from the unconfined variant's:\n%s\nwant\n%s", gen, want)
			}
		})
	}
	// deploy/variants/fleet: the init container's prewarm, with its
	// command, environment and image list as the variant has them (the
	// in-cluster mirror's name replaced by a pull-through mirror on
	// loopback), fills the cache through the mirror; then, the upstream
	// registry stopped, the sidecar renders from that cache under
	// containerd's RuntimeDefault. The upstream serves only the mirror.
	t.Run("fleet variant: prewarm through the mirror, render with the upstream gone", func(t *testing.T) {
		fleet := fleetPrewarm(t)
		up := registry.Start(t)
		var pkgImages []string
		for _, img := range fleet.images {
			fixture := strings.Split(img[strings.LastIndex(img, "/")+1:], ":")[0] // set-labels, set-annotations
			fnimage.Push(t, fnimage.Build(t, fixture), up.Addr+"/"+strings.TrimPrefix(img, "ghcr.io/"))
			pkgImages = append(pkgImages, img)
		}
		pushed := len(up.Agents())
		mirror := registry.StartMirror(t, up)
		fleetCache := ownedDir(t, filepath.Join(base, "fleet-cache"))
		containerd := filepath.Join(profiles, "containerd-docker-default.json")
		pod := func(env []string, extra ...string) []string {
			args := []string{"run", "--rm", "--network", "host", "--user", "999:999", "--cap-drop=all",
				"--security-opt", "no-new-privileges", "--read-only", "--tmpfs", "/tmp",
				"--security-opt", "seccomp=" + containerd, "-v", fleetCache + ":/home/argocd/.cache"}
			for _, e := range env {
				args = append(args, "-e", strings.ReplaceAll(e, "kptr-mirror:5000", mirror.Addr))
			}
			return append(args, extra...)
		}
		args := pod(fleet.env, "-v", fleet.listFile+":"+fleet.listPath+":ro", ref)
		if out, errs, code := run(append(args, fleet.command[1:]...)...); code != 0 {
			t.Fatalf("the variant's prewarm: exit %d:\n%s%s", code, out, errs)
		}
		if err := mirrorOnly(up, pushed); err != nil {
			t.Error(err)
		}
		up.Stop()

		pkg := filepath.Join(base, "fleet-pkg")
		os.MkdirAll(pkg, 0o755)
		kptfile := "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: fleet\npipeline:\n  mutators:\n"
		for _, img := range pkgImages {
			kptfile += "  - image: " + img + "\n    configMap:\n      fleet.kptr.dev/prewarmed: \"yes\"\n"
		}
		os.WriteFile(filepath.Join(pkg, "Kptfile"), []byte(kptfile), 0o644)
		os.WriteFile(filepath.Join(pkg, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fleet\n"), 0o644)
		env := append(fleet.sidecarEnv, "KPTR_CACHE_DIR=/home/argocd/.cache/kptr", "KPTR_ALLOWED_IMAGES=ghcr.io/kptdev/krm-functions-catalog/*", "KPTR_PROGRESS=none")
		gen, errs, code := run(append(pod(env, "-v", pkg+":/pkg:ro", "-w", "/pkg", ref), "generate")...)
		if code != 0 || strings.Count(gen, "fleet.kptr.dev/prewarmed: \"yes\"") != 2 {
			t.Fatalf("kptr generate with the upstream stopped: exit %d: %s\n%s", code, errs, gen)
		}
	})
}

// fleetVariant is what deploy/variants/fleet gives the prewarm init
// container and the sidecar.
type fleetVariant struct {
	command, env, sidecarEnv []string
	listFile, listPath       string // the ConfigMap's images.txt, and where the pod mounts it
	images                   []string
}

func fleetPrewarm(t *testing.T) fleetVariant {
	t.Helper()
	doc, err := yaml.ReadFile(filepath.Join(root, "deploy/variants/fleet/replicas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	strs := func(path ...string) []string {
		n, err := doc.Pipe(yaml.Lookup(path...))
		if err != nil || n == nil {
			t.Fatalf("deploy/variants/fleet/replicas.yaml: no %v", path)
		}
		var out []string
		for _, e := range n.Content() {
			if e.Kind == yaml.ScalarNode {
				out = append(out, e.Value)
				continue
			}
			var name, value string
			for i := 0; i+1 < len(e.Content); i += 2 {
				switch e.Content[i].Value {
				case "name":
					name = e.Content[i+1].Value
				case "value":
					value = e.Content[i+1].Value
				}
			}
			out = append(out, name+"="+value)
		}
		return out
	}
	const ic = "[name=kptr-prewarm]"
	v := fleetVariant{
		command:    strs("spec", "template", "spec", "initContainers", ic, "command"),
		env:        strs("spec", "template", "spec", "initContainers", ic, "env"),
		sidecarEnv: strs("spec", "template", "spec", "containers", "[name=kptr]", "env"),
		listFile:   filepath.Join(root, "deploy/variants/fleet/images.txt"),
	}
	if len(v.command) != 4 || v.command[2] != "--images-file" {
		t.Fatalf("prewarm command %v", v.command)
	}
	v.listPath = v.command[3]
	b, err := os.ReadFile(v.listFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			v.images = append(v.images, l)
		}
	}
	return v
}

// mirrorOnly says whether anything but a mirror (Go's default agent; kptr
// sends its own) asked up for anything after its first skip requests.
func mirrorOnly(up *registry.Registry, skip int) error {
	reqs := up.Agents()[skip:]
	if len(reqs) == 0 {
		return fmt.Errorf("the upstream served nothing: the mirror never fetched from it")
	}
	for _, r := range reqs {
		if r[1] != "Go-http-client/1.1" {
			return fmt.Errorf("the upstream served %s to %q, not to the mirror", r[0], r[1])
		}
	}
	return nil
}

// podman is Debian's podman (root, runc) under a containers.conf private
// to the test, with the image `make image` builds (static kptr) loaded as
// ref; base is the test's directory (removed at the end, with the image).
type podman struct {
	path, base, conf, ref string
	t                     *testing.T
}

// newPodman skips or fails as podmanOrSkip does, then writes the
// containers.conf: runc, not crun (crun refuses this kind of machine's
// hybrid cgroup layout), cgroupfs (no systemd), and ulimits below this
// machine's (podman's default nofile raise needs CAP_SYS_RESOURCE).
func newPodman(t *testing.T, prefix string) *podman {
	t.Helper()
	p := &podman{path: podmanOrSkip(t), t: t}
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	p.base, p.conf = base, filepath.Join(base, "containers.conf")
	var nofile, nproc unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile)
	unix.Getrlimit(unix.RLIMIT_NPROC, &nproc)
	nofile.Cur, nproc.Cur = min(nofile.Cur, nofile.Max, 4096), min(nproc.Cur, nproc.Max, 4096)
	os.WriteFile(p.conf, fmt.Appendf(nil, "[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n"+
		"[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
		nofile.Cur, nofile.Cur, nproc.Cur, nproc.Cur), 0o644)
	p.ref = fmt.Sprintf("localhost/kptr-e2e:podman-%d", os.Getpid())
	out := filepath.Join(base, "image")
	goCmd(t, nil, "run", "./deploy/image", "--kptr", staticKptr(t), "--sigverify", staticVerifier(), "--out", out, "--tag", p.ref)
	if _, errs, code := p.run("load", "-i", filepath.Join(out, "kptr.tar")); code != 0 {
		t.Fatalf("podman load: exit %d: %s", code, errs)
	}
	t.Cleanup(func() { p.run("rmi", "-f", p.ref) })
	return p
}

// run runs podman with args and returns stdout, stderr and the exit code.
func (p *podman) run(args ...string) (string, string, int) {
	return p.runStdin("", args...)
}

// runStdin is run with in on podman's stdin.
func (p *podman) runStdin(in string, args ...string) (string, string, int) {
	p.t.Helper()
	cmd := exec.Command(p.path, args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	cmd.Stdin = strings.NewReader(in)
	return runCmd(p.t, cmd)
}

// podmanOrSkip returns podman's path when it can run containers here (root,
// podman, runc); otherwise it fails under CI=true and skips elsewhere.
func podmanOrSkip(t *testing.T) string {
	t.Helper()
	podman, err := exec.LookPath("podman")
	why := ""
	switch _, rerr := exec.LookPath("runc"); {
	case err != nil:
		why = "podman not installed"
	case rerr != nil:
		why = "runc not installed"
	case os.Geteuid() != 0:
		why = "not root (the test runs podman as root)"
	}
	if why == "" {
		return podman
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: .ci/run installs podman and runc and runs as root", why)
	}
	t.Skip(why)
	return ""
}

// checkSecurityContext asserts that the kptr container of the Deployment
// patch at path (relative to the repository) has these securityContext
// fields (dotted paths; lists as [a,b]): what the podman flags above mirror.
func checkSecurityContext(t *testing.T, path string, want map[string]string) {
	t.Helper()
	doc, err := yaml.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	checkContainerSecurityContext(t, path, doc, "containers", "kptr", want)
}

// checkContainerSecurityContext is checkSecurityContext for the container
// name of the Deployment doc's list (containers or initContainers).
func checkContainerSecurityContext(t *testing.T, path string, doc *yaml.RNode, list, name string, want map[string]string) {
	t.Helper()
	sc, err := doc.Pipe(yaml.Lookup("spec", "template", "spec", list, "[name="+name+"]", "securityContext"))
	if err != nil || sc == nil {
		t.Fatalf("%s: no securityContext for the %s container: %v", path, name, err)
	}
	for field, value := range want {
		n, err := sc.Pipe(yaml.Lookup(strings.Split(field, ".")...))
		if err != nil || n == nil {
			t.Errorf("%s: %s securityContext.%s missing", path, name, field)
			continue
		}
		got := strings.TrimSpace(n.MustString())
		if n.YNode().Kind == yaml.SequenceNode {
			var vs []string
			for _, e := range n.Content() {
				vs = append(vs, e.Value)
			}
			got = "[" + strings.Join(vs, ",") + "]"
		}
		if got != value {
			t.Errorf("%s: %s securityContext.%s = %s, want %s (the test's podman flags mirror it)", path, name, field, got, value)
		}
	}
}
