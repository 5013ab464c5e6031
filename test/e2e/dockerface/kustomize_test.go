// Package dockerface is the end-to-end suite of kptr as the container CLI
// of the real kustomize and kpt. kustomize: `kustomize build --enable-alpha-plugins` of
// kustomizations whose transformers, generator and validator are
// containerized KRM functions (config.kubernetes.io/function: container:
// image:), with kptr as `docker` first on PATH and no other container CLI,
// renders exactly what the same function binaries render through
// kustomize's exec functions (--enable-exec). As root, as uid 999 (no
// capabilities, no_new_privs: kptr's namespace tier) and as uid 999 under
// containerd's RuntimeDefault seccomp profile (the repo-server's: kptr's
// landlock tier, where a function's bind mount is refused with exit 125).
// kpt (kpt_test.go): fn render and fn eval --image with
// KPT_FN_RUNTIME=docker and podman.
package dockerface

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/kustomizebin"
	"github.com/kptr-dev/kptr/test/registry"
)

var root = func() string { d, _ := filepath.Abs("../../.."); return d }()

// unprivUID is the Argo CD repo-server's user.
const unprivUID = 999

// fixtures are the function images (name → reference) and binaries.
var fixtures = []string{"set-labels", "set-annotations", "generator", "validate-resources", "kptr-fx", "cat"}

// (validate-resources re-encodes the resources it reads, which kustomize
// refuses from a validator, exec or container alike; kustomize's validators
// here are kptr-fx emitting a result.)

// Session is a user's directory: bin/ with kustomize and kptr as docker (and
// nothing else on PATH but the system's directories, where no docker is),
// fn/ with the function binaries for the exec variant, the kustomizations.
type session struct {
	base, bin, fnBin string
	images           map[string]string
	env              []string
}

func newSession(t testing.TB) *session {
	t.Helper()
	if p, err := exec.LookPath("docker"); err == nil {
		t.Logf("a docker is installed (%s); the test's PATH leaves it out", p)
	}
	base, err := os.MkdirTemp("", "kptr-kustomize-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	s := &session{base: base, bin: filepath.Join(base, "bin"), fnBin: filepath.Join(base, "fn"), images: map[string]string{}}
	for _, d := range []string{s.bin, s.fnBin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kptr := filepath.Join(s.bin, "kptr")
	build := exec.Command("go", "build", "-o", kptr, "./cmd/kptr")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build kptr: %v\n%s", err, out)
	}
	for _, n := range []string{"docker", "podman"} {
		if err := os.Symlink("kptr", filepath.Join(s.bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, kustomizebin.Path(t), filepath.Join(s.bin, "kustomize"))
	reg := registry.Start(t)
	for _, f := range fixtures {
		s.images[f] = reg.Addr + "/fn/" + f + ":v1"
		fnimage.Push(t, fnimage.Build(t, f, fnimage.WithMountPoints()), s.images[f])
		copyFile(t, fnimage.Binary(t, f), filepath.Join(s.fnBin, f))
	}
	s.env = []string{"PATH=" + s.bin + ":/usr/sbin:/usr/bin:/sbin:/bin", "KPTR_PROGRESS=none"}
	return s
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// writeTree writes files (path → content) below dir, readable by all.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
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

// function is the config.kubernetes.io/function annotation of fixture f:
// its image (container) or its binary (exec), with mounts for the container.
func (s *session) function(f string, container bool, mounts string) string {
	if !container {
		return "      exec:\n        path: " + filepath.Join(s.fnBin, f) + "\n"
	}
	spec := "      container:\n        image: " + s.images[f] + "\n"
	if mounts != "" {
		spec += "        mounts:\n" + mounts
	}
	return spec
}

// app writes the kustomization, in its container or exec form, below dir:
// two transformers (labels, annotations), a generator and a validator; and
// in mount/ one whose transformer reads a file of the repository through a
// bind mount.
func (s *session) app(t testing.TB, dir string, container bool) {
	t.Helper()
	dataDir := filepath.Join(dir, "mount", "data")
	readPath := "/var/greeting.txt" // in the container, where the mount puts it
	if !container {
		readPath = filepath.Join(dataDir, "greeting.txt")
	}
	// kustomize takes mount sources relative to the kustomization only
	mount := "        - type: bind\n          src: data\n          dst: /var\n"
	fn := func(name, f, data string, mounts string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  annotations:\n    config.kubernetes.io/function: |\n" +
			s.function(f, container, mounts) + "data:\n" + data
	}
	writeTree(t, dir, map[string]string{
		"kustomization.yaml": `resources:
- deployment.yaml
- configmap.yaml
transformers:
- labels.yaml
- annotations.yaml
generators:
- generator.yaml
validators:
- validator.yaml
`,
		"deployment.yaml":         "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n        resources:\n          limits:\n            memory: 64Mi\n",
		"configmap.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
		"labels.yaml":             fn("labels", "set-labels", "  tier: web\n  team: shop\n", ""),
		"annotations.yaml":        fn("annotations", "set-annotations", "  owner: platform\n", ""),
		"mount/readfile.yaml":     fn("readfile", "kptr-fx", "  op: readfile\n  path: "+readPath+"\n  key: greeting\n", mount),
		"generator.yaml":          fn("generated", "generator", "  name: generated\n  count: \"2\"\n", ""),
		"validator.yaml":          fn("validate", "validate-resources", "  require-labels: tier\n", ""),
		"mount/data/greeting.txt": "hello from the repository",
		// the mount in a kustomization of its own: kptr-fx keeps the path
		// annotations it reads, which kustomize then refuses to see a
		// validator pass through unchanged (exec and container alike)
		"mount/kustomization.yaml": "resources:\n- configmap.yaml\ntransformers:\n- readfile.yaml\n",
		"mount/configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
	})
}

// kustomize runs kustomize build in dir (the session's PATH and env) as
// id and returns stdout, stderr and the error.
func (s *session) kustomize(t testing.TB, dir string, id identity, extraEnv []string, args ...string) (string, string, error) {
	t.Helper()
	argv := append(append([]string{filepath.Join(s.bin, "kustomize"), "build"}, args...), dir)
	return s.run(t, id, extraEnv, argv...)
}

// run runs argv in the session's directory with its PATH and env as id,
// with a home of the identity's own, and returns stdout, stderr and the
// error.
func (s *session) run(t testing.TB, id identity, extraEnv []string, argv ...string) (string, string, error) {
	t.Helper()
	home := filepath.Join(s.base, "home-"+id.name)
	os.MkdirAll(home, 0o755)
	if id.seccomp != "" {
		argv = append([]string{s.seccompExec(t), id.seccomp}, argv...)
	}
	if id.unpriv {
		os.Chown(home, unprivUID, unprivUID)
		argv = append([]string{"setpriv", "--reuid=999", "--regid=999", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.base
	cmd.Env = append(append([]string{"HOME=" + home, "TMPDIR=" + home}, s.env...), extraEnv...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// identity is who runs kustomize and kpt (and so kptr) in a case.
type identity struct {
	name    string
	unpriv  bool   // uid 999, no capabilities, no_new_privs
	seccomp string // a seccomp profile seccompexec loads first, or ""
}

// runtimeDefault is containerd's default seccomp profile: what the
// repo-server gets under seccompProfile RuntimeDefault on containerd. It
// refuses user namespaces, so kptr runs its landlock tier there.
var runtimeDefault = filepath.Join(root, "test/e2e/argocd/testdata/runtime-default/containerd-docker-default.json")

// self is the test's own user, without a seccomp profile.
var self = identity{name: "self"}

// identities are the ones each scenario runs as: the test's user and,
// when the test runs as root, the repo-server's uid 999 (no capabilities,
// no_new_privs), bare and under RuntimeDefault (the landlock tier); as
// another user, that user under RuntimeDefault.
func identities() []identity {
	if os.Geteuid() != 0 {
		return []identity{self, {name: "self-runtimedefault", seccomp: runtimeDefault}}
	}
	return []identity{{name: "root"}, {name: "uid999", unpriv: true}, {name: "uid999-runtimedefault", unpriv: true, seccomp: runtimeDefault}}
}

// landlock says whether kptr runs its landlock tier as id: no user
// namespaces under RuntimeDefault, so no mount namespace, and bind mounts
// are refused (exit 125).
func (id identity) landlock() bool { return id.seccomp != "" }

// seccompExec builds test/e2e/argocd/seccompexec (cgo, libseccomp) once
// per session, outside the session's PATH.
func (s *session) seccompExec(t testing.TB) string {
	t.Helper()
	out := filepath.Join(s.base, "tools", "seccompexec")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, "./test/e2e/argocd/seccompexec")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build seccompexec: %v\n%s", err, b)
	}
	return out
}

// The containerized functions, through kptr as docker, render what the
// same binaries render as exec functions: transformers, a generator, a
// validator and a mount. Under RuntimeDefault (the landlock tier) the
// mount cannot be placed: the build fails with kptr's line, exit 125.
func TestKustomizeContainerizedFunctions(t *testing.T) {
	s := newSession(t)
	containerApp, execApp := filepath.Join(s.base, "app-container"), filepath.Join(s.base, "app-exec")
	s.app(t, containerApp, true)
	s.app(t, execApp, false)
	want, errs, err := s.kustomize(t, execApp, self, nil, "--enable-alpha-plugins", "--enable-exec")
	if err != nil {
		t.Fatalf("exec functions: %v\n%s", err, errs)
	}
	wantMount, errs, err := s.kustomize(t, filepath.Join(execApp, "mount"), self, nil, "--enable-alpha-plugins", "--enable-exec")
	if err != nil {
		t.Fatalf("exec functions: %v\n%s", err, errs)
	}
	for _, s := range []string{"tier: web", "owner: platform", "name: generated-0", "name: generated-1", "greeting: hello from the repository"} {
		if !strings.Contains(want+wantMount, s) {
			t.Fatalf("the exec rendering lacks %q:\n%s\n%s", s, want, wantMount)
		}
	}
	for _, id := range identities() {
		t.Run(id.name, func(t *testing.T) {
			for dir, want := range map[string]string{containerApp: want, filepath.Join(containerApp, "mount"): wantMount} {
				got, errs, err := s.kustomize(t, dir, id, nil, "--enable-alpha-plugins")
				if id.landlock() && strings.HasSuffix(dir, "mount") {
					assertMountRefused(t, got, errs, err)
					continue
				}
				if err != nil {
					t.Fatalf("%s: containerized functions through kptr as docker: %v\n%s", dir, err, errs)
				}
				if got != want {
					t.Errorf("%s: container rendering differs from the exec one:\n--- container\n%s\n--- exec\n%s\nstderr: %s", dir, got, want, errs)
				}
			}
		})
	}
}

// assertMountRefused checks a kustomize build whose function has a bind
// mount, run in kptr's landlock tier: no output, and kustomize's error
// carries kptr's one line (in docker run's terms: the caller never wrote a
// kpt command) and docker's exit code for "could not run it".
func assertMountRefused(t testing.TB, out, errs string, err error) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(errs, "\n") {
		if strings.HasPrefix(l, "kptr (docker): ") {
			lines = append(lines, l)
		}
	}
	if err == nil || out != "" || len(lines) != 1 || !strings.Contains(lines[0], "run --mount needs kptr's namespace tier") ||
		!strings.Contains(lines[0], "landlock tier") || strings.Contains(lines[0], "kpt fn eval") || !strings.Contains(errs, "exit status 125") {
		t.Errorf("a bind mount in the landlock tier: %v, want kptr's one line and exit status 125\nstdout:\n%s\nstderr:\n%s", err, out, errs)
	}
}

// What kustomize reports when the face refuses: a mount from outside the
// directories the operator allows fails the build with kptr's line, and a
// secret of kustomize's environment that a function config asks for (envs:)
// never reaches the function. As each identity: the policy is kptr's, the
// same in either tier.
func TestKustomizeRefusals(t *testing.T) {
	s := newSession(t)
	app := filepath.Join(s.base, "app-container")
	s.app(t, app, true)

	envApp := filepath.Join(s.base, "app-env")
	writeTree(t, envApp, map[string]string{
		"kustomization.yaml": "resources:\n- configmap.yaml\ntransformers:\n- getenv.yaml\n",
		"configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
		// a function config asking for the repo-server's Redis password
		"getenv.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: getenv\n  annotations:\n    config.kubernetes.io/function: |\n      container:\n        image: " +
			s.images["kptr-fx"] + "\n        envs:\n        - REDIS_PASSWORD\n        - GIVEN=in-the-repository\ndata:\n  op: environ\n",
	})
	secret := []string{"REDIS_PASSWORD=argocd-redis-secret"}
	if args := dockerArgs(t, s, envApp, secret); !strings.Contains(args, "-e REDIS_PASSWORD ") {
		t.Fatalf("kustomize did not ask for REDIS_PASSWORD with -e (the test would prove nothing): %s", args)
	}
	for _, id := range identities() {
		t.Run(id.name, func(t *testing.T) {
			_, errs, err := s.kustomize(t, filepath.Join(app, "mount"), id, []string{"KPTR_DOCKER_BIND_DIRS=" + filepath.Join(s.base, "bin")}, "--enable-alpha-plugins")
			if err == nil || !strings.Contains(errs, "not beneath a directory the operator allows bind mounts from (KPTR_DOCKER_BIND_DIRS") {
				t.Errorf("a mount outside KPTR_DOCKER_BIND_DIRS: %v\n%s", err, errs)
			}
			for _, tc := range []struct {
				env  []string
				seen bool
			}{{secret, false}, {append(secret, "KPTR_DOCKER_ENV=REDIS_PASSWORD"), true}} {
				out, errs, err := s.kustomize(t, envApp, id, tc.env, "--enable-alpha-plugins")
				if err != nil {
					t.Fatalf("%v: %v\n%s", tc.env, err, errs)
				}
				if !strings.Contains(out, "GIVEN=in-the-repository") {
					t.Fatalf("the function's environment is not in its output (the test would prove nothing):\n%s\n%s", out, errs)
				}
				if leaked := strings.Contains(out+errs, "argocd-redis-secret"); leaked != tc.seen {
					t.Errorf("env %v: the function saw the secret: %v, want %v\nstdout:\n%s\nstderr:\n%s", tc.env, leaked, tc.seen, out, errs)
				}
			}
		})
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerArgs renders dir with a recording docker in front of kptr's and
// returns the run line kustomize gave it.
func dockerArgs(t testing.TB, s *session, dir string, env []string) string {
	t.Helper()
	rec := filepath.Join(s.base, "recorder")
	os.MkdirAll(rec, 0o755)
	log := filepath.Join(rec, "argv")
	writeTree(t, rec, map[string]string{"docker": "#!/bin/sh\necho \"$*\" >> " + log + "\nexec " + filepath.Join(s.bin, "docker") + " \"$@\"\n"})
	os.Chmod(filepath.Join(rec, "docker"), 0o755)
	saved := s.env
	s.env = append([]string{"PATH=" + rec + ":" + strings.TrimPrefix(saved[0], "PATH=")}, saved[1:]...)
	defer func() { s.env = saved }()
	if _, errs, err := s.kustomize(t, dir, self, env, "--enable-alpha-plugins"); err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	return readFile(t, log)
}
