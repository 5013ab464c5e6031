package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// genFixture is a registry with the fixture functions pushed.
type genFixture struct {
	reg                  *registry.Registry
	labels, annots, fx   string // refs
	labelsImg, annotsImg v1.Image
}

// fixture starts a registry for this test and pushes set-labels,
// set-annotations and kptr-fx.
func fixture(t *testing.T) *genFixture {
	t.Helper()
	reg := registry.Start(t)
	f := &genFixture{reg: reg}
	f.labelsImg = fnimage.Build(t, "set-labels")
	f.annotsImg = fnimage.Build(t, "set-annotations")
	f.labels = reg.Addr + "/fn/set-labels:v1"
	f.annots = reg.Addr + "/fn/set-annotations:v1"
	f.fx = reg.Addr + "/fn/kptr-fx:v1"
	fnimage.Push(t, f.labelsImg, f.labels)
	fnimage.Push(t, f.annotsImg, f.annots)
	fnimage.Push(t, fnimage.Build(t, "kptr-fx"), f.fx)
	return f
}

func writeTree(t *testing.T, dir string, files map[string]string) {
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

func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	var paths []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return nil
	})
	sort.Strings(paths)
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		fmt.Fprintf(h, "%s\x00%x\x00", p, sha256.Sum256(b))
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// echoPackage is the seed plugin's example: an echoserver labelled and
// annotated at render time, with a subpackage.
func echoPackage(f *genFixture) map[string]string {
	return map[string]string{
		"Kptfile": `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: echo
  annotations:
    config.kubernetes.io/local-config: "true"
pipeline:
  mutators:
  - image: ` + f.labels + `
    configMap:
      app: echo
  - image: ` + f.annots + `
    configPath: annotations.yaml
`,
		"annotations.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: annotations
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  owner: platform
`,
		"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
spec:
  replicas: 1 # one is enough
`,
		"db/Kptfile": `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: db
`,
		"db/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  ports:
  - port: 5432
`,
	}
}

func genEnv(t *testing.T, f *genFixture, extra map[string]string) map[string]string {
	env := map[string]string{
		"KPTR_CACHE_DIR":      t.TempDir(),
		"KPTR_ALLOWED_IMAGES": f.reg.Addr + "/fn/*",
		"KPTR_PROGRESS":       "none",
		"HOME":                t.TempDir(),
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func generateIn(t *testing.T, dir string, env map[string]string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	g := newGlobals(nil, &out, &errb, envMap(env))
	err := execIn(context.Background(), g, "generate", dir)
	if err != nil {
		code = exitCodeOf(err)
		if code == 0 {
			t.Fatalf("error with exit code 0: %v", err)
		}
	}
	return code, out.String(), errb.String()
}

func TestGenerateRendersPackageTreeInMemory(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	writeTree(t, dir, echoPackage(f))
	before := treeHash(t, dir)

	code, out, errs := generateIn(t, dir, genEnv(t, f, map[string]string{
		"ARGOCD_APP_NAME":                   "echo",
		"ARGOCD_APP_REVISION":               "4c0ffee",
		"ARGOCD_APP_SOURCE_REPO_URL":        "https://git.example.com/org/repo.git",
		"ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
		"ARGOCD_APP_SOURCE_PATH":            "apps/echo",
		"PARAM_ANNOTATION_DOMAIN":           "kptr.dev",
	}))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if errs != "" {
		t.Errorf("stderr must stay empty on success, got %q", errs)
	}
	want := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo
  annotations:
    owner: platform
    kptr.dev/app-name: echo
    kptr.dev/revision: 4c0ffee
    kptr.dev/repo-url: https://git.example.com/org/repo.git
    kptr.dev/target-revision: main
    kptr.dev/source-path: apps/echo
  labels:
    app: echo
spec:
  replicas: 1 # one is enough
---
apiVersion: v1
kind: Service
metadata:
  name: db
  annotations:
    owner: platform
    kptr.dev/app-name: echo
    kptr.dev/revision: 4c0ffee
    kptr.dev/repo-url: https://git.example.com/org/repo.git
    kptr.dev/target-revision: main
    kptr.dev/source-path: apps/echo
  labels:
    app: echo
spec:
  ports:
  - port: 5432
`
	if out != want {
		t.Errorf("manifests:\n%s\nwant:\n%s", out, want)
	}
	if after := treeHash(t, dir); after != before {
		t.Error("generate wrote into the checkout")
	}

	// Without the parameter there are no metadata annotations.
	code, out, errs = generateIn(t, dir, genEnv(t, f, map[string]string{"ARGOCD_APP_NAME": "echo"}))
	if code != 0 || strings.Contains(out, "app-name") || !strings.Contains(out, "owner: platform") {
		t.Errorf("exit %d, stderr %q, output:\n%s", code, errs, out)
	}
}

func TestGenerateFailingFunction(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Kptfile": `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
  - image: ` + f.fx + `
    configMap:
      op: crash
      code: "3"
      message: "replicas must be at most 5
        (found 9)"
`,
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	code, out, errs := generateIn(t, dir, genEnv(t, f, nil))
	if code == 0 || out != "" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	if strings.Count(errs, "\n") != 1 {
		t.Errorf("stderr must be one line: %q", errs)
	}
	for _, want := range []string{"kptr-fx:v1", "exit code 3", "replicas must be at most 5"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q does not contain %q", errs, want)
		}
	}
}

func TestGenerateRefusesImageOutsideAllowList(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	other := f.reg.Addr + "/other/set-labels:v1"
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + other + "\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	before := len(f.reg.Requests())
	// Every untrusted spelling of "allow it" is present and ignored.
	env := genEnv(t, f, untrustedEnv())
	delete(env, "PARAM_FN_TIMEOUT")
	code, out, errs := generateIn(t, dir, env)
	if code == 0 || out != "" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	if !strings.Contains(errs, other) || !strings.Contains(errs, f.reg.Addr+"/fn/*") || !strings.Contains(errs, "not allowed") {
		t.Errorf("rejection must name the image and the patterns: %q", errs)
	}
	for _, r := range f.reg.Requests()[before:] {
		if strings.Contains(r, "/other/") {
			t.Errorf("the registry was asked for the refused image: %s", r)
		}
	}
}

func TestGenerateRefusesExecAndNetworkWhateverTheParameters(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - exec: \"sh -c 'touch " + marker + "; cat'\"\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	env := genEnv(t, f, untrustedEnv())
	code, out, errs := generateIn(t, dir, env)
	if code == 0 || out != "" || !strings.Contains(errs, "allow-exec") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the exec function ran")
	}
	// The operator can allow it.
	env["KPTR_ALLOW_EXEC"] = "true"
	if code, _, errs := generateIn(t, dir, env); code != 0 {
		t.Fatalf("operator-allowed exec: exit %d %s", code, errs)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the operator-allowed exec function did not run")
	}
}

func TestGenerateEmptyResult(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Kptfile":  "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
		"fns.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
	})
	code, out, errs := generateIn(t, dir, genEnv(t, f, map[string]string{"PARAM_ALLOW_EMPTY": "true", "ARGOCD_ENV_KPTR_ALLOW_EMPTY": "true"}))
	if code == 0 || out != "" || !strings.Contains(errs, "KPTR_ALLOW_EMPTY") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	code, out, errs = generateIn(t, dir, genEnv(t, f, map[string]string{"KPTR_ALLOW_EMPTY": "true"}))
	if code != 0 || out != "" {
		t.Fatalf("operator-allowed empty: exit %d stdout %q stderr %q", code, out, errs)
	}
}

func TestPrewarmPullsOnceThenNothingAndExports(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	writeTree(t, dir, echoPackage(f))
	// A validator in a subpackage is found too.
	writeTree(t, dir, map[string]string{"db/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: db\npipeline:\n  validators:\n  - image: " + f.fx + "\n"})
	cacheDir := t.TempDir()
	env := map[string]string{"KPTR_CACHE_DIR": cacheDir, "KPTR_PROGRESS": "none", "HOME": t.TempDir()}

	blobs := map[string]int{}
	for _, img := range []v1.Image{f.labelsImg, f.annotsImg} {
		ls, _ := img.Layers()
		for _, l := range ls {
			d, _ := l.Digest()
			blobs[d.String()] = f.reg.BlobGets(d.String())
		}
		cd, _ := img.ConfigName()
		blobs[cd.String()] = f.reg.BlobGets(cd.String())
	}

	run := func(args ...string) (string, string) {
		var out, errb bytes.Buffer
		g := newGlobals(nil, &out, &errb, envMap(env))
		if err := execIn(context.Background(), g, append([]string{"prewarm"}, args...)...); err != nil {
			t.Fatalf("prewarm %v: %v\n%s", args, err, errb.String())
		}
		return out.String(), errb.String()
	}
	_, errs := run(dir)
	for _, ref := range []string{f.labels, f.annots, f.fx} {
		if !strings.Contains(errs, ref+" sha256:") {
			t.Errorf("prewarm did not report %s:\n%s", ref, errs)
		}
	}
	for d, n := range blobs {
		if got := f.reg.BlobGets(d) - n; got != 1 {
			t.Errorf("blob %s fetched %d times", d, got)
		}
	}
	// Second run under IfNotPresent: no blob and no manifest is downloaded.
	reqs := len(f.reg.Requests())
	run(dir)
	if extra := f.reg.Requests()[reqs:]; len(extra) != 0 {
		t.Errorf("second prewarm touched the registry: %v", extra)
	}

	// Export to a tarball and import on an "air-gapped" cache.
	tarPath := filepath.Join(t.TempDir(), "fns.tar")
	run("--offline", "--export", tarPath, "--image", f.labels, dir)
	if st, err := os.Stat(tarPath); err != nil || st.Size() == 0 {
		t.Fatalf("export: %v", err)
	}
	env2 := map[string]string{"KPTR_CACHE_DIR": t.TempDir(), "KPTR_PROGRESS": "none", "HOME": t.TempDir()}
	var out, errb bytes.Buffer
	g := newGlobals(nil, &out, &errb, envMap(env2))
	g.cacheDir = env2["KPTR_CACHE_DIR"]
	c, err := g.openCacheWith(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Import(context.Background(), tarPath); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Offline, the imported cache has everything the package needs.
	env2["KPTR_OFFLINE"] = "true"
	env = env2
	run(dir)
}

func TestPrewarmImagesFileAndNames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "images.txt")
	os.WriteFile(p, []byte("# catalog\nset-labels:v0.2.0  # bare name\n\nexample.com/fn/x\n"), 0o644)
	imgs, err := readImagesFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := prewarmRefs(nil, imgs, "ghcr.io/kptdev/krm-functions-catalog/", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"example.com/fn/x:latest", "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("refs = %v, want %v", got, want)
	}
}

func TestGenerateFailuresAreOneLineAndNoOutput(t *testing.T) {
	f := fixture(t)
	unreachable := echoPackage(f)
	for k, v := range unreachable {
		unreachable[k] = strings.ReplaceAll(v, f.reg.Addr, "127.0.0.1:1")
	}
	for _, tc := range []struct {
		name, want string
		pkg        map[string]string
		env        map[string]string
	}{
		{"bad sandbox setting", "--sandbox", echoPackage(f), map[string]string{"KPTR_SANDBOX": "bogus"}},
		{"bad pull policy", "Sometimes", echoPackage(f), map[string]string{"KPTR_IMAGE_PULL_POLICY": "Sometimes"}},
		{"registry unreachable", "connection refused", unreachable, map[string]string{"KPTR_ALLOWED_IMAGES": "127.0.0.1:1/fn/*"}},
		{"output over the operator's limit", "KPTR_MAX_OUTPUT_BYTES", echoPackage(f), map[string]string{"KPTR_MAX_OUTPUT_BYTES": "100"}},
	} {
		dir := t.TempDir()
		writeTree(t, dir, tc.pkg)
		code, out, errs := generateIn(t, dir, genEnv(t, f, tc.env))
		if code == 0 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "kptr generate: ") || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d stdout %q stderr %q", tc.name, code, out, errs)
		}
		t.Logf("%s: %s", tc.name, strings.TrimSpace(errs))
	}
}

// Kptfile `tag:` constraints list the repository's tags only when the
// allow-list allows the repository, and the picked tag is checked again.
func TestGenerateTagConstraintsUnderTheAllowList(t *testing.T) {
	f := fixture(t)
	for _, tag := range []string{"v1.0.0", "v1.0.3", "v2.0.0"} {
		fnimage.Push(t, f.labelsImg, f.reg.Addr+"/fn/set-labels:"+tag)
		fnimage.Push(t, f.labelsImg, f.reg.Addr+"/other/set-labels:"+tag)
	}
	pkg := func(repo string) string {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + repo + "\n    tag: \"~1.0\"\n    configMap:\n      team: web\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		})
		return dir
	}
	before := len(f.reg.Requests())
	code, out, errs := generateIn(t, pkg(f.reg.Addr+"/fn/set-labels"), genEnv(t, f, nil))
	if code != 0 || !strings.Contains(out, "team: web") {
		t.Fatalf("allowed constraint: exit %d stdout %q stderr %q", code, out, errs)
	}
	var pulledV103 bool
	for _, r := range f.reg.Requests()[before:] {
		pulledV103 = pulledV103 || strings.Contains(r, "/fn/set-labels/manifests/v1.0.3")
	}
	if !pulledV103 {
		t.Errorf("constraint ~1.0 did not resolve to v1.0.3: %v", f.reg.Requests()[before:])
	}

	// Only a tag-less pattern for another repository: no tag listing of /other/.
	before = len(f.reg.Requests())
	code, out, errs = generateIn(t, pkg(f.reg.Addr+"/other/set-labels"), genEnv(t, f, map[string]string{"KPTR_ALLOWED_IMAGES": f.reg.Addr + "/fn/set-labels:v1.*"}))
	if code == 0 || out != "" || !strings.Contains(errs, "not allowed") {
		t.Fatalf("refused repository: exit %d stdout %q stderr %q", code, out, errs)
	}
	for _, r := range f.reg.Requests()[before:] {
		if strings.Contains(r, "/other/") {
			t.Errorf("the refused repository was contacted: %s", r)
		}
	}
	// A tag pattern that the constraint's pick does not match is refused after the pick.
	code, out, errs = generateIn(t, pkg(f.reg.Addr+"/fn/set-labels"), genEnv(t, f, map[string]string{"KPTR_ALLOWED_IMAGES": f.reg.Addr + "/fn/set-labels:v1.0.0"}))
	if code == 0 || out != "" || !strings.Contains(errs, "set-labels:v1.0.3") {
		t.Fatalf("picked tag outside the allow-list: exit %d stdout %q stderr %q", code, out, errs)
	}
}

// cache ls's LAST USED is the last function run that used an image: "never"
// after a pull (it used to show the pull or import time), the run's minute
// after a render.
func TestCacheLsShowsLastRun(t *testing.T) {
	f := fixture(t)
	env := genEnv(t, f, map[string]string{"KPTR_INSECURE_REGISTRIES": f.reg.Addr})
	for k, v := range env {
		t.Setenv(k, v)
	}
	lastUsed := func() string {
		t.Helper()
		code, out, errs := runIn(t, "kptr", "cache", "ls")
		if code != 0 {
			t.Fatalf("cache ls: %d %s", code, errs)
		}
		for _, l := range strings.Split(out, "\n") {
			// REFERENCE DIGEST PLATFORM SIZE(2 words) LAST-USED(never | date time) STATE
			if fs := strings.Fields(l); len(fs) > 6 && fs[0] == f.labels {
				if fs[5] == "never" {
					return fs[5]
				}
				return fs[5] + " " + fs[6]
			}
		}
		t.Fatalf("%s not listed:\n%s", f.labels, out)
		return ""
	}
	if code, _, errs := runIn(t, "kptr", "cache", "pull", f.labels); code != 0 {
		t.Fatalf("pull: %d %s", code, errs)
	}
	if got := lastUsed(); got != "never" {
		t.Errorf("after a pull: LAST USED %q, want never", got)
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + f.labels + "\n    configMap: {a: \"1\"}\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	before := time.Now().Truncate(time.Minute)
	if code, _, errs := runIn(t, "kptr", "fn", "render", dir, "-o", "unwrap"); code != 0 {
		t.Fatalf("render: %d %s", code, errs)
	}
	got, err := time.ParseInLocation("2006-01-02 15:04", lastUsed(), time.Local)
	if err != nil || got.Before(before) || got.After(time.Now()) {
		t.Errorf("after a render: LAST USED %v (%v), want the render's minute", got, err)
	}
}
