// Package deploy holds kptr's Argo CD manifests (kustomize component,
// variants, Helm values, examples); this test builds them with kustomize's Go
// API against Argo CD's own manifests/install.yaml of the release the
// examples pin (argoCDVersion) and checks the result.
package deploy

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kptr-dev/kptr/signature"
)

// argoCDVersion is the Argo CD release deploy/ is written and tested against:
// deploy/examples/install installs it, testdata/argocd-<version> holds its
// manifests/install.yaml.
const argoCDVersion = "v3.6.1"

// stockBase is the kustomization of Argo CD's install.yaml (every object of a
// stock install, the repo-server Deployment among them).
const stockBase = "testdata/argocd-" + argoCDVersion

// build runs kustomize on an overlay of the stock Argo CD install with
// the given components (paths relative to deploy/).
func build(t *testing.T, components ...string) map[string]*yaml.RNode {
	t.Helper()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	var k strings.Builder
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: argocd\nresources:\n")
	// kustomize refuses absolute roots: refer to deploy/ relative to the overlay.
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(here, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k.WriteString("- " + rel(stockBase) + "\ncomponents:\n")
	for _, c := range components {
		k.WriteString("- " + rel(c) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %v: %v", components, err)
	}
	out := map[string]*yaml.RNode{}
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		n, err := yaml.Parse(string(b))
		if err != nil {
			t.Fatal(err)
		}
		out[n.GetKind()+"/"+n.GetName()] = n
	}
	return out
}

// podSpec returns the repo-server's pod spec as a generic map.
func podSpec(t *testing.T, objs map[string]*yaml.RNode) map[string]any {
	t.Helper()
	d := objs["Deployment/argocd-repo-server"]
	if d == nil {
		t.Fatalf("no argocd-repo-server Deployment in %v", keys(objs))
	}
	m, err := d.Map()
	if err != nil {
		t.Fatal(err)
	}
	return dig(m, "spec", "template", "spec").(map[string]any)
}

func keys(m map[string]*yaml.RNode) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func named(list any, name string) map[string]any {
	items, _ := list.([]any)
	var found map[string]any
	n := 0
	for _, it := range items {
		m, _ := it.(map[string]any)
		if m["name"] == name {
			found = m
			n++
		}
	}
	if n > 1 {
		return map[string]any{"duplicate": n}
	}
	return found
}

func kptrContainer(t *testing.T, spec map[string]any) map[string]any {
	t.Helper()
	c := named(spec["containers"], "kptr")
	if c == nil {
		t.Fatal("no kptr container in the repo-server pod")
	}
	return c
}

// sidecarCommand starts argocd-cmp-server under kptr init: as the
// container's pid 1 it would never reap the orphans it inherits (a
// background `kptr cache fetch` that outlived a render Argo CD killed),
// argoproj/argo-cd#29349.
var sidecarCommand = []any{"kptr", "init", "--", "/var/run/argocd/argocd-cmp-server"}

// Every variant keeps the component's command (the Helm values' is
// TestHelmValuesMatchComponent's).
func TestVariantsKeepSidecarCommand(t *testing.T) {
	variants, err := os.ReadDir("variants")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		t.Run(v.Name(), func(t *testing.T) {
			c := kptrContainer(t, podSpec(t, build(t, "component", "variants/"+v.Name())))
			if got := c["command"]; !reflect.DeepEqual(got, sidecarCommand) {
				t.Errorf("command = %v, want %v", got, sidecarCommand)
			}
		})
	}
}

func TestComponentPatchesRepoServer(t *testing.T) {
	stock := podSpec(t, build(t))
	spec := podSpec(t, build(t, "component"))

	// The stock container and init container are untouched; kptr is added.
	if !reflect.DeepEqual(named(spec["containers"], "argocd-repo-server"), named(stock["containers"], "argocd-repo-server")) {
		t.Error("the component changed the argocd-repo-server container")
	}
	if !reflect.DeepEqual(spec["initContainers"], stock["initContainers"]) {
		t.Error("the component changed the init containers")
	}
	if n := len(spec["containers"].([]any)); n != 2 {
		t.Errorf("want 2 containers, got %d", n)
	}
	c := kptrContainer(t, spec)
	if got := c["command"]; !reflect.DeepEqual(got, sidecarCommand) {
		t.Errorf("command = %v, want %v", got, sidecarCommand)
	}
	if !strings.HasPrefix(c["image"].(string), "ghcr.io/kptr-dev/kptr:") {
		t.Errorf("image = %v", c["image"])
	}
	sc := c["securityContext"].(map[string]any)
	if sc["runAsUser"] != 999 || sc["runAsNonRoot"] != true || sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
		t.Errorf("securityContext = %v", sc)
	}
	if !reflect.DeepEqual(dig(sc, "capabilities", "drop"), []any{"ALL"}) {
		t.Errorf("capabilities = %v", sc["capabilities"])
	}
	if dig(sc, "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("component alone must keep RuntimeDefault, got %v", sc["seccompProfile"])
	}

	// Mounts: the cmp-server binary and socket dirs, /tmp and the cache.
	wantMounts := map[string]string{
		"var-files":  "/var/run/argocd",
		"plugins":    "/home/argocd/cmp-server/plugins",
		"cmp-tmp":    "/tmp",
		"kptr-cache": "/home/argocd/.cache",
	}
	for name, path := range wantMounts {
		m := named(c["volumeMounts"], name)
		if m == nil || m["mountPath"] != path {
			t.Errorf("mount %s = %v, want at %s", name, m, path)
		}
		if v := named(spec["volumes"], name); v == nil || v["duplicate"] != nil {
			t.Errorf("volume %s missing or duplicated: %v", name, v)
		}
	}
	// The stock emptyDirs are reused, not redefined.
	if !reflect.DeepEqual(named(spec["volumes"], "var-files"), named(stock["volumes"], "var-files")) {
		t.Error("var-files volume changed")
	}
	if dig(named(spec["volumes"], "cmp-tmp"), "emptyDir") == nil || dig(named(spec["volumes"], "kptr-cache"), "emptyDir") == nil {
		t.Error("cmp-tmp and kptr-cache must be emptyDirs")
	}

	env := map[string]string{}
	for _, e := range c["env"].([]any) {
		m := e.(map[string]any)
		env[m["name"].(string)] = m["value"].(string)
	}
	if env["KPTR_ALLOW_EXEC"] != "false" || env["KPTR_ALLOW_NETWORK"] != "false" || env["KPTR_ALLOWED_IMAGES"] == "" {
		t.Errorf("operator policy env = %v", env)
	}
	if !strings.HasPrefix(env["KPTR_CACHE_DIR"], "/home/argocd/.cache/") {
		t.Errorf("cache dir %q is not on the cache volume", env["KPTR_CACHE_DIR"])
	}
}

func TestSecurityVariants(t *testing.T) {
	sc := kptrContainer(t, podSpec(t, build(t, "component", "variants/seccomp-localhost")))["securityContext"].(map[string]any)
	if !reflect.DeepEqual(sc["seccompProfile"], map[string]any{"type": "Localhost", "localhostProfile": "kptr/kptr-sandbox.json"}) {
		t.Errorf("seccomp = %v", sc["seccompProfile"])
	}
	if !reflect.DeepEqual(sc["appArmorProfile"], map[string]any{"type": "Localhost", "localhostProfile": "kptr-sandbox"}) {
		t.Errorf("apparmor = %v", sc["appArmorProfile"])
	}
	if sc["runAsUser"] != 999 || sc["allowPrivilegeEscalation"] != false {
		t.Errorf("variant lost the base securityContext: %v", sc)
	}
	// The profile the variant names exists and is valid JSON with the calls
	// the sandbox needs left allowed.
	var prof struct {
		DefaultAction string `yaml:"defaultAction"`
		Syscalls      []struct {
			Names  []string `yaml:"names"`
			Action string   `yaml:"action"`
		} `yaml:"syscalls"`
	}
	data, err := os.ReadFile("variants/seccomp-localhost/profiles/kptr-sandbox.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &prof); err != nil {
		t.Fatal(err)
	}
	for _, s := range prof.Syscalls {
		for _, n := range s.Names {
			switch n {
			case "unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "setns", "fsopen", "fsmount", "open_tree", "move_mount", "mount_setattr":
				t.Errorf("profile denies %s, which the sandbox needs", n)
			}
		}
	}
	if prof.DefaultAction != "SCMP_ACT_ALLOW" || len(prof.Syscalls) == 0 {
		t.Errorf("profile = %+v", prof)
	}
	aa, err := os.ReadFile("variants/seccomp-localhost/profiles/kptr-sandbox.apparmor")
	if err != nil || !bytes.Contains(aa, []byte("profile kptr-sandbox ")) || !bytes.Contains(aa, []byte("userns,")) {
		t.Errorf("apparmor profile missing or without userns: %v", err)
	}

	sc = kptrContainer(t, podSpec(t, build(t, "component", "variants/unconfined")))["securityContext"].(map[string]any)
	if dig(sc, "seccompProfile", "type") != "Unconfined" || dig(sc, "appArmorProfile", "type") != "Unconfined" {
		t.Errorf("unconfined variant: %v", sc)
	}
	if !reflect.DeepEqual(dig(sc, "capabilities", "drop"), []any{"ALL"}) || sc["readOnlyRootFilesystem"] != true {
		t.Errorf("unconfined variant must keep the rest: %v", sc)
	}
}

// The security-profiles-operator variant ships the seccomp-localhost
// variant's profiles as SPO objects: their rules are those of the files
// (which stay the source), and the kptr container references them by the
// names SPO installs them under.
func TestSecurityProfilesOperatorVariant(t *testing.T) {
	objs := build(t, "component", "variants/security-profiles-operator")
	const profiles = "variants/seccomp-localhost/profiles/"

	sp := objs["SeccompProfile/kptr-sandbox"]
	if sp == nil {
		t.Fatalf("no SeccompProfile kptr-sandbox in %v", keys(objs))
	}
	if sp.GetApiVersion() != "security-profiles-operator.x-k8s.io/v1beta1" || sp.GetNamespace() != "argocd" {
		t.Errorf("SeccompProfile is %s in namespace %q", sp.GetApiVersion(), sp.GetNamespace())
	}
	spMap, err := sp.Map()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(profiles + "kptr-sandbox.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	// SeccompProfileSpec has no comment field: the JSON's comments are
	// YAML comments in the object; every rule is compared.
	for _, s := range want["syscalls"].([]any) {
		delete(s.(map[string]any), "comment")
	}
	if got := spMap["spec"]; !reflect.DeepEqual(normalise(got), normalise(want)) {
		t.Errorf("SeccompProfile spec differs from %skptr-sandbox.json:\n%v\nwant\n%v", profiles, got, want)
	}

	aa := objs["AppArmorProfile/kptr-sandbox"]
	if aa == nil {
		t.Fatalf("no AppArmorProfile kptr-sandbox in %v", keys(objs))
	}
	if aa.GetApiVersion() != "security-profiles-operator.x-k8s.io/v1alpha1" || aa.GetNamespace() != "argocd" {
		t.Errorf("AppArmorProfile is %s in namespace %q", aa.GetApiVersion(), aa.GetNamespace())
	}
	policy, err := aa.GetString("spec.policy")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(profiles + "kptr-sandbox.apparmor")
	if err != nil {
		t.Fatal(err)
	}
	if policy != string(text) {
		t.Errorf("AppArmorProfile spec.policy differs from %skptr-sandbox.apparmor", profiles)
	}

	// The container names the file SPO writes for a namespaced profile
	// (operator/<namespace>/<name>.json below the kubelet's seccomp root)
	// and the AppArmor profile by the name its text declares.
	sc := kptrContainer(t, podSpec(t, objs))["securityContext"].(map[string]any)
	wantSeccomp := map[string]any{"type": "Localhost", "localhostProfile": "operator/" + sp.GetNamespace() + "/" + sp.GetName() + ".json"}
	if !reflect.DeepEqual(sc["seccompProfile"], wantSeccomp) {
		t.Errorf("seccompProfile = %v, want %v", sc["seccompProfile"], wantSeccomp)
	}
	if !reflect.DeepEqual(sc["appArmorProfile"], map[string]any{"type": "Localhost", "localhostProfile": aa.GetName()}) ||
		!strings.Contains(policy, "\nprofile "+aa.GetName()+" ") {
		t.Errorf("appArmorProfile = %v, the policy must declare profile %s", sc["appArmorProfile"], aa.GetName())
	}
	if sc["runAsUser"] != 999 || sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true {
		t.Errorf("variant lost the base securityContext: %v", sc)
	}
}

func TestPrewarmedVariant(t *testing.T) {
	spec := podSpec(t, build(t, "component", "variants/prewarmed"))
	ic := named(spec["initContainers"], "kptr-prewarm")
	if ic == nil {
		t.Fatal("no kptr-prewarm init container")
	}
	kc := kptrContainer(t, spec)
	if ic["image"] != kc["image"] {
		t.Errorf("init image %v differs from the sidecar's %v", ic["image"], kc["image"])
	}
	if !reflect.DeepEqual(ic["command"], []any{"kptr", "cache", "import", "/usr/share/kptr/prewarm"}) {
		t.Errorf("command = %v", ic["command"])
	}
	if m := named(ic["volumeMounts"], "kptr-cache"); m["mountPath"] != named(kc["volumeMounts"], "kptr-cache")["mountPath"] {
		t.Errorf("init container mounts the cache at %v", m)
	}
	if !reflect.DeepEqual(ic["env"], []any{map[string]any{"name": "KPTR_CACHE_DIR", "value": "/home/argocd/.cache/kptr"}}) {
		t.Errorf("env = %v", ic["env"])
	}
	if sc := ic["securityContext"].(map[string]any); sc["runAsUser"] != 999 || sc["readOnlyRootFilesystem"] != true {
		t.Errorf("securityContext = %v", sc)
	}
	// The stock copyutil init container is still there.
	if named(spec["initContainers"], "copyutil") == nil {
		t.Error("copyutil init container lost")
	}
}

// stripComments drops comment lines, so two profiles compare by their rules.
func stripComments(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "# ") && t != "#" {
			out = append(out, l)
		}
	}
	return out
}

// The AppArmor profiles compile with the real parser (policy is compiled, not
// loaded: this machine has no AppArmor kernel), and the 3.x variant is the
// 4.x profile minus exactly its userns rule.
func TestAppArmorProfilesCompile(t *testing.T) {
	parser, err := exec.LookPath("apparmor_parser")
	if err != nil {
		t.Fatal("apparmor_parser not found: .ci/run installs the apparmor package")
	}
	out, _ := exec.Command(parser, "--version").Output()
	v4 := !strings.Contains(string(out), "version 2.") && !strings.Contains(string(out), "version 3.")
	dir := "variants/seccomp-localhost/profiles"
	compile := func(name string) error {
		cmd := exec.Command(parser, "--skip-kernel-load", "--skip-cache", "--skip-read-cache", "-S", filepath.Join(dir, name))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%v: %s", err, stderr.String())
		}
		return nil
	}
	if err := compile("kptr-sandbox-apparmor3.apparmor"); err != nil {
		t.Errorf("kptr-sandbox-apparmor3.apparmor: %v", err)
	}
	if v4 {
		if err := compile("kptr-sandbox.apparmor"); err != nil {
			t.Errorf("kptr-sandbox.apparmor: %v", err)
		}
	} else if err := compile("kptr-sandbox.apparmor"); err == nil || !strings.Contains(err.Error(), "line") {
		t.Errorf("a 3.x parser must reject only the userns rule, got %v", err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "kptr-sandbox.apparmor"))
	b, _ := os.ReadFile(filepath.Join(dir, "kptr-sandbox-apparmor3.apparmor"))
	ra, rb := stripComments(a), stripComments(b)
	var withoutUserns []string
	for _, l := range ra {
		if strings.TrimSpace(l) != "userns," {
			withoutUserns = append(withoutUserns, l)
		}
	}
	if len(withoutUserns) != len(ra)-1 || !reflect.DeepEqual(withoutUserns, rb) {
		t.Errorf("the 3.x profile must be the 4.x profile minus its userns rule:\n%s\n---\n%s", strings.Join(ra, "\n"), strings.Join(rb, "\n"))
	}
}

// pluginPath is where argocd-cmp-server reads plugin.yaml in the sidecar
// (deploy/image bakes the repository's copy there).
const pluginPath = "/home/argocd/cmp-server/config/plugin.yaml"

func TestPluginConfigMapVariant(t *testing.T) {
	objs := build(t, "component", "variants/plugin-configmap")
	var cm *yaml.RNode
	for k, n := range objs {
		if strings.HasPrefix(k, "ConfigMap/kptr-plugin-") {
			cm = n
		}
	}
	if cm == nil {
		t.Fatalf("no generated kptr-plugin ConfigMap in %v", keys(objs))
	}
	want, err := os.ReadFile("../plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.GetDataMap()["plugin.yaml"]; got != string(want) {
		t.Errorf("ConfigMap plugin.yaml differs from the repository's plugin.yaml")
	}
	spec := podSpec(t, objs)
	v := named(spec["volumes"], "kptr-plugin")
	if dig(v, "configMap", "name") != cm.GetName() {
		t.Errorf("volume refers to %v, ConfigMap is %s", dig(v, "configMap", "name"), cm.GetName())
	}
	m := named(kptrContainer(t, spec)["volumeMounts"], "kptr-plugin")
	if m["mountPath"] != pluginPath || m["subPath"] != "plugin.yaml" {
		t.Errorf("plugin mount = %v", m)
	}

	// The signature policy comes from its own ConfigMap, mounted where
	// KPTR_SIGNATURE_POLICY points, and is a policy kptr loads.
	var pcm *yaml.RNode
	for k, n := range objs {
		if strings.HasPrefix(k, "ConfigMap/kptr-signature-policy-") {
			pcm = n
		}
	}
	if pcm == nil {
		t.Fatalf("no generated kptr-signature-policy ConfigMap in %v", keys(objs))
	}
	doc := pcm.GetDataMap()["signature-policy.json"]
	if _, err := signature.Parse([]byte(doc), t.TempDir()); err != nil {
		t.Errorf("the variant's signature policy does not load: %v", err)
	}
	if v := named(spec["volumes"], "kptr-signature-policy"); dig(v, "configMap", "name") != pcm.GetName() {
		t.Errorf("policy volume refers to %v, ConfigMap is %s", dig(v, "configMap", "name"), pcm.GetName())
	}
	pm := named(kptrContainer(t, spec)["volumeMounts"], "kptr-signature-policy")
	env := named(kptrContainer(t, spec)["env"], "KPTR_SIGNATURE_POLICY")
	if pm["mountPath"] == nil || env["value"] != fmt.Sprint(pm["mountPath"])+"/signature-policy.json" {
		t.Errorf("KPTR_SIGNATURE_POLICY = %v, policy mounted at %v", env["value"], pm["mountPath"])
	}
	if named(kptrContainer(t, spec)["env"], "KPTR_CACHE_DIR") == nil {
		t.Error("the patch replaced the sidecar's environment instead of adding to it")
	}
}

// The Helm values describe the same sidecar as the component with the
// Localhost variant; a drift between them is a bug in one of the two.
func TestHelmValuesMatchComponent(t *testing.T) {
	data, err := os.ReadFile("helm/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		RepoServer struct {
			ExtraContainers []map[string]any `yaml:"extraContainers"`
			Volumes         []any            `yaml:"volumes"`
		} `yaml:"repoServer"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	if len(values.RepoServer.ExtraContainers) != 1 {
		t.Fatalf("extraContainers = %v", values.RepoServer.ExtraContainers)
	}
	helm := values.RepoServer.ExtraContainers[0]
	spec := podSpec(t, build(t, "component", "variants/seccomp-localhost"))
	kust := kptrContainer(t, spec)
	for _, f := range []string{"name", "image", "command", "env", "securityContext", "volumeMounts", "resources"} {
		if !reflect.DeepEqual(normalise(helm[f]), normalise(kust[f])) {
			t.Errorf("helm %s = %v\ncomponent %s = %v", f, helm[f], f, kust[f])
		}
	}
	for _, name := range []string{"cmp-tmp", "kptr-cache"} {
		if !reflect.DeepEqual(normalise(named(values.RepoServer.Volumes, name)), normalise(named(spec["volumes"], name))) {
			t.Errorf("helm volume %s differs from the component's", name)
		}
	}
}

// normalise round-trips through YAML so that int/float and map types compare equal.
func normalise(v any) any {
	b, _ := yaml.Marshal(v)
	var out any
	_ = yaml.Unmarshal(b, &out)
	return out
}

func TestExamples(t *testing.T) {
	data, err := os.ReadFile("examples/application.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app, err := yaml.Parse(string(data))
	if err != nil {
		t.Fatal(err)
	}
	path, _ := app.GetString("spec.source.path")
	if _, err := os.Stat(filepath.Join("..", path, "Kptfile")); err != nil {
		t.Errorf("the Application's path %q has no Kptfile: %v", path, err)
	}
	plugin, _ := yaml.ReadFile("../plugin.yaml")
	name, _ := plugin.GetString("metadata.name")
	version, _ := plugin.GetString("spec.version")
	if got, _ := app.GetString("spec.source.plugin.name"); got != name+"-"+version {
		t.Errorf("Application names plugin %q, plugin.yaml serves %q", got, name+"-"+version)
	}
	kf, err := yaml.ReadFile("examples/echoserver/Kptfile")
	if err != nil {
		t.Fatal(err)
	}
	fns, _ := kf.Pipe(yaml.Lookup("pipeline", "mutators"))
	var images []string
	for _, f := range fns.Content() {
		images = append(images, yaml.NewRNode(f).Field("image").Value.YNode().Value)
	}
	if len(images) != 2 || !strings.Contains(images[0], "/set-labels:") || !strings.Contains(images[1], "/set-annotations:") {
		t.Errorf("example pipeline = %v", images)
	}
	for _, img := range images {
		if !strings.HasPrefix(img, "ghcr.io/kptdev/krm-functions-catalog/") {
			t.Errorf("%s is outside the component's default allow-list", img)
		}
	}
	// The install example refers to components that exist.
	inst, err := yaml.ReadFile("examples/install/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, _ := inst.Pipe(yaml.Lookup("resources"))
	wantURL := "https://raw.githubusercontent.com/argoproj/argo-cd/" + argoCDVersion + "/manifests/install.yaml"
	if res == nil || len(res.Content()) != 1 || res.Content()[0].Value != wantURL {
		t.Errorf("install example resources = %v, want [%s] (the release %s checks)", res.MustString(), wantURL, stockBase)
	}
	// "Pin both": the kptr image too, never to latest
	imgs, _ := inst.Pipe(yaml.Lookup("images"))
	for _, im := range imgs.Content() {
		if tag := yaml.NewRNode(im).Field("newTag"); tag == nil || tag.Value.YNode().Value == "" || tag.Value.YNode().Value == "latest" {
			t.Errorf("install example: image %s is not pinned to a version", yaml.NewRNode(im).Field("name").Value.YNode().Value)
		}
	}
	comps, _ := inst.Pipe(yaml.Lookup("components"))
	for _, c := range comps.Content() {
		if _, err := os.Stat(filepath.Join("examples/install", c.Value, "kustomization.yaml")); err != nil {
			t.Errorf("install example: %v", err)
		}
	}
}

// The copy in testdata is the release's own install.yaml: compared with the
// Argo CD Go module when the module cache holds it (`make argocd` puts it
// there); skipped otherwise, since this module does not depend on Argo CD.
func TestStockInstallIsTheRelease(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Skipf("go env GOMODCACHE: %v", err)
	}
	mod := filepath.Join(strings.TrimSpace(string(out)), "github.com/argoproj/argo-cd/v3@"+argoCDVersion, "manifests/install.yaml")
	want, err := os.ReadFile(mod)
	if err != nil {
		t.Skipf("Argo CD %s is not in the module cache: %v", argoCDVersion, err)
	}
	got, err := os.ReadFile(filepath.Join(stockBase, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s/install.yaml differs from %s", stockBase, mod)
	}
	// The stock repo-server as operators run it: what the component's patch
	// must leave alone and build on.
	spec := podSpec(t, build(t))
	if c := named(spec["containers"], "argocd-repo-server"); c == nil {
		t.Fatalf("%s has no argocd-repo-server container", stockBase)
	}
	for _, v := range []string{"var-files", "plugins"} {
		if named(spec["volumes"], v) == nil {
			t.Errorf("the stock repo-server has no %s volume, which the sidecar mounts", v)
		}
	}
}

// The kustomize-docker variant puts kptr into the repo-server container as
// docker: an init container of the sidecar's image runs `kptr
// install-docker` into an emptyDir, the repo-server mounts it read-only
// first on its PATH with a cache and the operator's allow-list, and
// argocd-cm turns on kustomize's --enable-alpha-plugins.
func TestKustomizeDockerVariant(t *testing.T) {
	objs := build(t, "component", "variants/kustomize-docker")
	spec := podSpec(t, objs)
	ic := named(spec["initContainers"], "kptr-docker")
	if ic == nil {
		t.Fatal("no kptr-docker init container")
	}
	if ic["image"] != kptrContainer(t, spec)["image"] {
		t.Errorf("init image %v differs from the sidecar's", ic["image"])
	}
	if !reflect.DeepEqual(ic["command"], []any{"kptr", "install-docker", "/usr/local/kptr/bin"}) {
		t.Errorf("command = %v", ic["command"])
	}
	if sc := ic["securityContext"].(map[string]any); sc["runAsUser"] != 999 || sc["readOnlyRootFilesystem"] != true {
		t.Errorf("securityContext = %v", sc)
	}
	rs := named(spec["containers"], "argocd-repo-server")
	env := map[string]string{}
	for _, e := range rs["env"].([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			env[m["name"].(string)] = v
		}
	}
	if !strings.HasPrefix(env["PATH"], "/usr/local/kptr/bin:") || env["KPTR_CACHE_DIR"] == "" || env["KPTR_ALLOWED_IMAGES"] == "" {
		t.Errorf("repo-server env = %v", env)
	}
	if m := named(rs["volumeMounts"], "kptr-docker-bin"); m["mountPath"] != "/usr/local/kptr/bin" || m["readOnly"] != true {
		t.Errorf("repo-server mounts the bin volume as %v", m)
	}
	cm := objs["ConfigMap/argocd-cm"]
	if cm == nil {
		t.Fatalf("no argocd-cm among %v", keys(objs))
	}
	if v := cm.GetDataMap()["kustomize.buildOptions"]; v != "--enable-alpha-plugins" {
		t.Errorf("argocd-cm kustomize.buildOptions = %q", v)
	}
}

// The fleet variant: replicas, the in-cluster mirror every image is fetched
// through (sidecar and prewarm alike, plain HTTP allowed only to it), the
// prewarm list from its ConfigMap, and the cache sized for it.
func TestFleetVariant(t *testing.T) {
	objs := build(t, "component", "variants/fleet")
	d, err := objs["Deployment/argocd-repo-server"].Map()
	if err != nil {
		t.Fatal(err)
	}
	if r := dig(d, "spec", "replicas"); r != 3 {
		t.Errorf("replicas = %v, want 3", r)
	}
	spec := podSpec(t, objs)
	svc := objs["Service/kptr-mirror"]
	mirror := objs["Deployment/kptr-mirror"]
	if svc == nil || mirror == nil {
		t.Fatalf("no kptr-mirror Deployment and Service in %v", keys(objs))
	}
	if svc.GetNamespace() != "argocd" || mirror.GetNamespace() != "argocd" {
		t.Errorf("the mirror is in %q/%q, not beside the repo-server (its short name must resolve there)", svc.GetNamespace(), mirror.GetNamespace())
	}
	sm, _ := svc.Map()
	port := dig(sm, "spec", "ports").([]any)[0].(map[string]any)["port"]
	host := fmt.Sprintf("%s:%v", svc.GetName(), port)
	mm, _ := mirror.Map()
	reg := named(dig(mm, "spec", "template", "spec", "containers"), "registry")
	if e := named(reg["env"], "REGISTRY_PROXY_REMOTEURL"); e["value"] != "https://ghcr.io" {
		t.Errorf("mirror upstream = %v, want https://ghcr.io", e)
	}
	if sc, _ := reg["securityContext"].(map[string]any); sc["runAsNonRoot"] != true || sc["readOnlyRootFilesystem"] != true {
		t.Errorf("mirror securityContext = %v", sc)
	}
	ic := named(spec["initContainers"], "kptr-prewarm")
	kc := kptrContainer(t, spec)
	if ic == nil {
		t.Fatal("no kptr-prewarm init container")
	}
	for _, c := range []map[string]any{ic, kc} {
		if e := named(c["env"], "KPTR_MIRRORS"); e["value"] != "ghcr.io="+host {
			t.Errorf("%v: KPTR_MIRRORS = %v, want ghcr.io=%s", c["name"], e["value"], host)
		}
		if e := named(c["env"], "KPTR_INSECURE_REGISTRIES"); e["value"] != host {
			t.Errorf("%v: KPTR_INSECURE_REGISTRIES = %v, want only the mirror %s", c["name"], e["value"], host)
		}
		if m := named(c["volumeMounts"], "kptr-cache"); m["mountPath"] != "/home/argocd/.cache" {
			t.Errorf("%v: cache mounted at %v", c["name"], m)
		}
	}
	if named(kc["env"], "KPTR_ALLOWED_IMAGES") == nil || named(kc["env"], "KPTR_TIMEOUT") == nil {
		t.Error("the patch replaced the sidecar's environment instead of adding to it")
	}
	if ic["image"] != kc["image"] {
		t.Errorf("prewarm image %v differs from the sidecar's %v", ic["image"], kc["image"])
	}
	if sc := ic["securityContext"].(map[string]any); sc["runAsUser"] != 999 || sc["readOnlyRootFilesystem"] != true {
		t.Errorf("prewarm securityContext = %v", sc)
	}
	// The list the init container reads is the ConfigMap's images.txt.
	cmd, _ := ic["command"].([]any)
	if len(cmd) != 4 || cmd[0] != "kptr" || cmd[1] != "prewarm" || cmd[2] != "--images-file" {
		t.Fatalf("prewarm command = %v", cmd)
	}
	var cm *yaml.RNode
	for k, n := range objs {
		if strings.HasPrefix(k, "ConfigMap/kptr-prewarm-images-") {
			cm = n
		}
	}
	if cm == nil {
		t.Fatalf("no generated kptr-prewarm-images ConfigMap in %v", keys(objs))
	}
	if v := named(spec["volumes"], "kptr-prewarm-images"); dig(v, "configMap", "name") != cm.GetName() {
		t.Errorf("prewarm volume refers to %v, ConfigMap is %s", dig(v, "configMap", "name"), cm.GetName())
	}
	m := named(ic["volumeMounts"], "kptr-prewarm-images")
	if fmt.Sprint(m["mountPath"])+"/images.txt" != cmd[3] {
		t.Errorf("the list is mounted at %v, prewarm reads %v", m["mountPath"], cmd[3])
	}
	images := 0
	for _, l := range strings.Split(cm.GetDataMap()["images.txt"], "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			images++
			if !strings.HasPrefix(l, "ghcr.io/") {
				t.Errorf("prewarm image %s is not under the mirrored ghcr.io", l)
			}
		}
	}
	if images == 0 {
		t.Error("the prewarm list names no image")
	}
	// The repo-server reads the setting from argocd-cmd-params-cm (Argo CD's
	// own install.yaml maps the key to ARGOCD_REPO_SERVER_PLUGIN_USE_MANIFEST_GENERATE_PATHS).
	params := objs["ConfigMap/argocd-cmd-params-cm"]
	if params == nil || params.GetDataMap()["reposerver.plugin.use.manifest.generate.paths"] != "true" {
		t.Errorf("argocd-cmd-params-cm does not enable reposerver.plugin.use.manifest.generate.paths")
	}
	rs := named(spec["containers"], "argocd-repo-server")
	if e := named(rs["env"], "ARGOCD_REPO_SERVER_PLUGIN_USE_MANIFEST_GENERATE_PATHS"); dig(e, "valueFrom", "configMapKeyRef", "key") != "reposerver.plugin.use.manifest.generate.paths" {
		t.Errorf("the repo-server does not read reposerver.plugin.use.manifest.generate.paths: %v", e)
	}
	if s := dig(named(spec["volumes"], "kptr-cache"), "emptyDir", "sizeLimit"); s != "2Gi" {
		t.Errorf("cache emptyDir sizeLimit = %v, want the 2Gi docs/argocd.md sizes", s)
	}
}

// mountedPlugin returns the plugin.yaml a built pod's kptr container reads:
// the ConfigMap mounted at pluginPath (exactly one mount there), nil when
// none is (the image's copy).
func mountedPlugin(t *testing.T, objs map[string]*yaml.RNode) *yaml.RNode {
	t.Helper()
	spec := podSpec(t, objs)
	var at []map[string]any
	for _, m := range kptrContainer(t, spec)["volumeMounts"].([]any) {
		if m := m.(map[string]any); m["mountPath"] == pluginPath {
			at = append(at, m)
		}
	}
	if len(at) == 0 {
		return nil
	}
	if len(at) > 1 || at[0]["subPath"] != "plugin.yaml" {
		t.Fatalf("mounts at %s: %v, want one of a ConfigMap's plugin.yaml", pluginPath, at)
	}
	cmName := dig(named(spec["volumes"], fmt.Sprint(at[0]["name"])), "configMap", "name")
	cm := objs[fmt.Sprintf("ConfigMap/%v", cmName)]
	if cm == nil {
		t.Fatalf("%s is mounted from ConfigMap %v, which the build does not have", pluginPath, cmName)
	}
	doc, err := yaml.Parse(cm.GetDataMap()["plugin.yaml"])
	if err != nil {
		t.Fatalf("ConfigMap %s: plugin.yaml: %v", cm.GetName(), err)
	}
	return doc
}

// The fleet variant mounts the repository's plugin without its discover
// section (docs/argocd.md, Running a fleet): Argo CD then never sends the
// sidecar the whole repository to ask whether the plugin matches, and
// every Application names the plugin. Listed after plugin-configmap, the
// fleet's plugin.yaml is the one mounted.
func TestFleetVariantPluginWithoutDiscovery(t *testing.T) {
	stock, err := yaml.ReadFile("../plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := stock.Pipe(yaml.Lookup("spec", "discover")); d == nil {
		t.Fatal("../plugin.yaml has no discover section: the premise of this test is gone")
	}
	want, err := stock.Map()
	if err != nil {
		t.Fatal(err)
	}
	delete(want["spec"].(map[string]any), "discover")
	name, _ := stock.GetString("metadata.name")
	version, _ := stock.GetString("spec.version")
	// What Argo CD matches spec.source.plugin.name against: the socket
	// argocd-cmp-server names <name>-<version>.sock.
	pluginName := name + "-" + version

	for _, components := range [][]string{
		{"component", "variants/fleet"},
		{"component", "variants/plugin-configmap", "variants/fleet"},
	} {
		t.Run(strings.Join(components[1:], "+"), func(t *testing.T) {
			doc := mountedPlugin(t, build(t, components...))
			if doc == nil {
				t.Fatalf("the pod reads the image's plugin.yaml (with discovery): nothing is mounted at %s", pluginPath)
			}
			if d, _ := doc.Pipe(yaml.Lookup("spec", "discover")); d != nil {
				t.Errorf("the mounted plugin.yaml has a discover section: %s", d.MustString())
			}
			got, err := doc.Map()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dig(got, "spec", "generate", "command"), []any{"kptr", "generate"}) {
				t.Errorf("generate command = %v, want [kptr generate]", dig(got, "spec", "generate", "command"))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the mounted plugin.yaml is not ../plugin.yaml without discover:\n%v\nwant\n%v", got, want)
			}
		})
	}
	// The docs tell every Application to name the plugin by that name.
	for _, f := range []string{"../docs/argocd.md", "variants/fleet/kustomization.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("name: "+pluginName+"\n")) {
			t.Errorf("%s shows no Application naming the plugin %s", f, pluginName)
		}
	}
}
