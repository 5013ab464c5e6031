package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kptr-dev/kptr/test/bench/pkggen"
)

// Image sets (-images): which images and binaries the benchmark runs.
const (
	// imagesFixture: the minimal fixture images (busybox base, static
	// stripped 1–8 MB binaries), what every earlier row measured.
	imagesFixture = "fixture"
	// imagesCatalog: catalog-shaped images (fnimage.WithCatalogShape: an
	// alpine-like base, 20–40 MB dynamically linked binaries with the C
	// library in the image) and, as the validator, a Starlark interpreter
	// running a policy program from its functionConfig.
	imagesCatalog = "catalog-shaped"
)

// starlarkFixture replaces the validator in the catalog-shaped set.
const starlarkFixture = "starlark-validator"

// policyFile is the validator's functionConfig in a catalog-shaped package.
const policyFile = "validate-policy.yaml"

// imageFixture is the fixture an image of the set is built from.
func imageFixture(set, fixture string) string {
	if set == imagesCatalog && fixture == pkggen.Fixtures[3] {
		return starlarkFixture
	}
	return fixture
}

// policyProgram is the Starlark program of the catalog-shaped validator: the
// checks test/fixtures/validate-resources makes in Go, written in Starlark.
// It reads its parameters from the functionConfig and reports into
// resource_list's results where the interpreter has them (the fixture's);
// the catalog's starlark has none, so there it checks and reports nothing.
const policyProgram = `params = ctx.resource_list["functionConfig"].get("params", {})
required = [l for l in params.get("require-labels", "").split(",") if l]
want_namespace = params.get("require-namespace", "") == "true"
results = ctx.resource_list.get("results") or []
items = ctx.resource_list["items"]

def ref(r):
    meta = r.get("metadata", {})
    return {"apiVersion": r.get("apiVersion", ""), "kind": r.get("kind", ""),
            "name": meta.get("name", ""), "namespace": meta.get("namespace", "")}

def path_of(r):
    return r.get("metadata", {}).get("annotations", {}).get("internal.config.kubernetes.io/path", "")

def warn(r, field, msg):
    results.append({"message": msg, "severity": "warning", "resourceRef": ref(r), "field": field, "file": path_of(r)})

def validate():
    for r in items:
        meta = r.get("metadata", {})
        kind = r.get("kind", "")
        annotations = meta.get("annotations", {})
        local = annotations.get("config.kubernetes.io/local-config", "") == "true"
        if not meta.get("name", ""):
            warn(r, "metadata.name", "resource has no name")
        if not local and kind != "Kptfile":
            labels = meta.get("labels", {})
            for l in required:
                if l not in labels:
                    warn(r, "metadata.labels", "missing label " + l)
        if want_namespace and not local and kind not in ("Kptfile", "Namespace"):
            if not meta.get("namespace", ""):
                warn(r, "metadata.namespace", "resource has no namespace")
        spec = r.get("spec", {})
        if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
            containers = spec.get("template", {}).get("spec", {}).get("containers", [])
            for i, c in enumerate(containers):
                field = "spec.template.spec.containers[%d]" % i
                image = c.get("image", "")
                last = image.split("/")[-1]
                if ":" not in last or last.split(":")[-1] == "latest":
                    warn(r, field + ".image", "image %r has no pinned tag" % image)
                if "memory" not in c.get("resources", {}).get("limits", {}):
                    warn(r, field + ".resources.limits.memory", "container has no memory limit")
        elif kind == "Service":
            for i, p in enumerate(spec.get("ports", [])):
                if "targetPort" not in p:
                    warn(r, "spec.ports[%d].targetPort" % i, "service port has no targetPort")

validate()
found = len(results)
results.append({"message": "checked %d resources, %d finding(s)" % (len(items), found), "severity": "info"})
`

// useStarlarkPolicy turns the validator entry of the package's Kptfile
// (pkggen writes an inline ConfigMap for validate-resources) into a
// configPath naming a StarlarkRun holding policyProgram with the same
// parameters, written next to it as a local-config resource.
func useStarlarkPolicy(dir string) error {
	kf := filepath.Join(dir, "Kptfile")
	b, err := os.ReadFile(kf)
	if err != nil {
		return err
	}
	s := string(b)
	i := strings.LastIndex(s, "  validators:\n")
	if i < 0 {
		return fmt.Errorf("%s: no validators", kf)
	}
	j := strings.Index(s[i:], "      configMap:\n")
	if j < 0 {
		return fmt.Errorf("%s: the validator has no configMap", kf)
	}
	params := map[string]string{}
	var keys []string
	for _, line := range strings.Split(strings.TrimRight(s[i+j+len("      configMap:\n"):], "\n"), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			return fmt.Errorf("%s: validator configMap line %q", kf, line)
		}
		params[k] = v
		keys = append(keys, k)
	}
	s = s[:i+j] + "      configPath: " + policyFile + "\n"
	var p strings.Builder
	p.WriteString("apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata:\n  name: policy\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nparams:\n")
	for _, k := range keys {
		fmt.Fprintf(&p, "  %s: %s\n", k, params[k])
	}
	p.WriteString("source: |\n")
	for _, line := range strings.Split(strings.TrimRight(policyProgram, "\n"), "\n") {
		if line == "" {
			p.WriteString("\n")
			continue
		}
		p.WriteString("  " + line + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, policyFile), []byte(p.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(kf, []byte(s), 0o644)
}

// imagesLine describes the image set for the header: its name and each
// function binary's size.
func (b *bench) imagesLine() string {
	var parts []string
	for _, f := range append(append([]string{}, pkggen.Fixtures...), "cat") {
		name := imageFixture(b.images, f)
		if b.images == imagesReal && f != "cat" {
			name = realRef(f)
		}
		if st, err := os.Stat(b.bin[f]); err == nil {
			parts = append(parts, fmt.Sprintf("%s %.1f MB", name, float64(st.Size())/1e6))
		}
	}
	return b.images + " (" + strings.Join(parts, ", ") + ")"
}

// installed copies bin, and the signature verifier beside it if there is
// one, into a directory of the bench's own, as `make install` or an image
// layer would put them, and returns the copy's path. A binary measured
// straight after linking is not what users run: the linker writes it
// through a mapping, and the page cache keeps it in large folios, which a
// process's resident set counts whole (kptr version measured 26 MiB where
// a copy of the same binary measures 17 MiB).
func (b *bench) installed(bin, name string) (string, error) {
	d := filepath.Join(b.root, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{filepath.Base(bin), "kptr-sigverify"} {
		src := filepath.Join(filepath.Dir(bin), f)
		if _, err := os.Stat(src); err != nil && f != filepath.Base(bin) {
			continue
		}
		if out, err := exec.Command("install", "-m", "0755", src, filepath.Join(d, f)).CombinedOutput(); err != nil {
			return "", fmt.Errorf("install %s: %v: %s", src, err, out)
		}
	}
	return filepath.Join(d, filepath.Base(bin)), nil
}

// ownTmpDir makes a TMPDIR under the work directory for the kptr binary
// bin (see tmpDirs), traversable by the sandboxes' uids as the run-state
// directory must be.
func (b *bench) ownTmpDir(bin, name string) error {
	d := filepath.Join(b.root, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		return err
	}
	tmpDirs[bin] = d
	return nil
}
