package pkggen

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kptr-dev/kptr/test/fnimage"
)

// TestFixturesOnThePackage runs the pipeline's fixture functions, as
// binaries, over the generated package the way kpt chains them, and checks
// what each is documented to do: the setters applied where the comments
// are (a scalar field, a field of a list item, a list item), the namespace
// and labels set (selectors and pod templates too), local-config left
// alone, the validator quiet on the result and not on the package before,
// and a second pass changing nothing.
func TestFixturesOnThePackage(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, Options{Resources: 50}); err != nil {
		t.Fatal(err)
	}
	items, err := kio.LocalPackageReader{PackagePath: dir, MatchFilesGlob: []string{"*.yaml"}}.Read()
	if err != nil {
		t.Fatal(err)
	}
	var setters *yaml.RNode
	for _, it := range items {
		if it.GetName() == "setters" {
			setters = it
		}
	}
	cm := func(data map[string]string) *yaml.RNode {
		n := yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\n")
		n.SetDataMap(data)
		return n
	}
	validatorCfg := cm(map[string]string{"require-labels": "app.kubernetes.io/part-of,team", "require-namespace": "true"})

	if _, res := run(t, "validate-resources", validatorCfg, items); !strings.Contains(res, "warning") {
		t.Errorf("the validator found nothing in the unrendered package:\n%s", res)
	}
	rendered := items
	var res string
	for _, step := range []struct {
		fixture string
		cfg     *yaml.RNode
	}{
		{"apply-setters", setters},
		{"set-namespace", cm(map[string]string{"namespace": Namespace})},
		{"set-labels-catalog", cm(Labels)},
	} {
		rendered, res = run(t, step.fixture, step.cfg, rendered)
		if step.fixture == "apply-setters" && strings.Count(res, "set field value to") != 3*20 {
			t.Errorf("apply-setters: want 3 fields set per Deployment (20):\n%s", res)
		}
		// The catalog's set-namespace warns once for every resource without
		// an upstream origin (all 50; setters.yaml is local-config).
		if step.fixture == "set-namespace" && (strings.Count(res, "does not have upstream origin.") != 50 || strings.Count(res, "severity: warning") != 50) {
			t.Errorf("set-namespace: want one warning per resource (50):\n%s", res)
		}
	}
	text := stringOf(t, rendered)
	for _, want := range []string{
		"replicas: 3 # kpt-set: ${replicas}",
		"image: gcr.io/example-team/app-0000:v1.2.3 # kpt-set: ${registry}/app-0000:${tag}",
		"- --log-level=debug # kpt-set: --log-level=${log-level}",
		"# the level the application starts with",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered package lacks %q", want)
		}
	}
	for _, it := range rendered {
		local := it.GetAnnotations()["config.kubernetes.io/local-config"] == "true"
		if ns := it.GetNamespace(); (ns == Namespace) == local {
			t.Errorf("%s/%s: namespace %q (local-config %v)", it.GetKind(), it.GetName(), ns, local)
		}
		paths := [][]string{{"metadata", "labels"}}
		switch it.GetKind() {
		case "Deployment":
			paths = append(paths, []string{"spec", "selector", "matchLabels"}, []string{"spec", "template", "metadata", "labels"})
		case "Service":
			paths = append(paths, []string{"spec", "selector"})
		}
		for _, p := range paths {
			v, _ := it.Pipe(yaml.Lookup(append(p, "team")...))
			if (v != nil) == local {
				t.Errorf("%s/%s: label team at %v: %v (local-config %v)", it.GetKind(), it.GetName(), p, v != nil, local)
			}
		}
	}
	if _, res := run(t, "validate-resources", validatorCfg, rendered); !strings.Contains(res, "checked 51 resources, 0 finding(s)") || strings.Contains(res, "warning") {
		t.Errorf("the validator on the rendered package:\n%s", res)
	}
	again := rendered
	for _, f := range []struct {
		fixture string
		cfg     *yaml.RNode
	}{{"apply-setters", setters}, {"set-namespace", cm(map[string]string{"namespace": Namespace})}, {"set-labels-catalog", cm(Labels)}} {
		again, _ = run(t, f.fixture, f.cfg, again)
	}
	if got := stringOf(t, again); got != text {
		t.Errorf("a second pass changed the package")
	}
}

// run pipes a ResourceList of items and cfg through the fixture binary and
// returns its items and its results as YAML.
func run(t *testing.T, fixture string, cfg *yaml.RNode, items []*yaml.RNode) ([]*yaml.RNode, string) {
	t.Helper()
	var in bytes.Buffer
	w := kio.ByteWriter{Writer: &in, WrappingKind: kio.ResourceListKind, WrappingAPIVersion: kio.ResourceListAPIVersion, FunctionConfig: cfg, KeepReaderAnnotations: true}
	if err := w.Write(copyAll(items)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fnimage.Binary(t, fixture))
	cmd.Stdin = &in
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", fixture, err, errb.String())
	}
	r := kio.ByteReader{Reader: bytes.NewReader(out), OmitReaderAnnotations: true}
	got, err := r.Read()
	if err != nil {
		t.Fatalf("%s: output: %v", fixture, err)
	}
	results, _ := yaml.Parse(string(out))
	res, _ := results.Pipe(yaml.Lookup("results"))
	s := ""
	if res != nil {
		s, _ = res.String()
	}
	return got, s
}

func copyAll(items []*yaml.RNode) []*yaml.RNode {
	out := make([]*yaml.RNode, len(items))
	for i, it := range items {
		out[i] = it.Copy()
	}
	return out
}

func stringOf(t *testing.T, items []*yaml.RNode) string {
	t.Helper()
	var b bytes.Buffer
	if err := (kio.ByteWriter{Writer: &b}).Write(copyAll(items)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
