// Package pkggen writes the realistic kpt package issue 13 measures kptr
// with, at any size: 40 % Deployments carrying `# kpt-set:` setter comments
// (on a scalar field, on a field of a list item — the container's image — and
// on a list item — one of the container's args), 30 % Services, 30 %
// ConfigMaps (a plain comment above a data key), spread over files of about
// 20 resources, a fifth of them in a subpackage (db/, a Kptfile without a
// pipeline). The root Kptfile runs the catalog-shaped fixture functions:
// apply-setters (configPath: setters.yaml, a local-config ConfigMap),
// set-namespace and set-labels-catalog as mutators, validate-resources as the
// validator, standing in for starlark.
//
//	err := pkggen.Write(dir, pkggen.Options{Resources: 500})                  // images, for kptr
//	err := pkggen.Write(dir, pkggen.Options{Resources: 500, Function: exec}) // exec: paths, for kpt --allow-exec
//
// Write is deterministic: the same options give the same bytes. A render
// changes every Deployment (the setters' values differ from the files'),
// every resource's namespace and labels; rendering the result again changes
// nothing. The validator finds nothing in a rendered package.
package pkggen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Fixtures are the fixture functions (under test/fixtures) the root Kptfile
// runs, in pipeline order: three mutators, then the validator.
var Fixtures = []string{"apply-setters", "set-namespace", "set-labels-catalog", "validate-resources"}

// Image is the default Options.Function: each fixture as a catalog-like
// image reference, gcr.io/kpt-fn/<fixture>:bench.
func Image(fixture string) (key, value string) {
	return "image", ImageRef(fixture)
}

// ImageRef is the image reference Image gives fixture.
func ImageRef(fixture string) string { return "gcr.io/kpt-fn/" + fixture + ":bench" }

// Options says what Write writes.
type Options struct {
	// Resources is the number of resources, Kptfiles and setters.yaml aside
	// (at least 10).
	Resources int
	// Function gives the pipeline entry naming fixture: its key ("image" or
	// "exec") and value. Nil means Image.
	Function func(fixture string) (key, value string)
}

// Setters are the values setters.yaml gives apply-setters.
var Setters = map[string]string{"registry": "gcr.io/example-team", "tag": "v1.2.3", "replicas": "3", "log-level": "debug"}

// Namespace and Labels are what the pipeline's set-namespace and
// set-labels-catalog set.
const Namespace = "bench"

var Labels = map[string]string{"app.kubernetes.io/part-of": "bench", "team": "platform"}

const perFile = 20

// Write creates the package in dir, which must not exist or be empty.
func Write(dir string, o Options) error {
	if o.Resources < 10 {
		return fmt.Errorf("pkggen: %d resources: need at least 10", o.Resources)
	}
	fn := o.Function
	if fn == nil {
		fn = Image
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("pkggen: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pkggen: %w", err)
	}
	files := map[string]string{
		"Kptfile":      kptfile(fn),
		"setters.yaml": settersYAML(),
		"db/Kptfile":   "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: db\ninfo:\n  description: the database tier (a subpackage, no pipeline of its own)\n",
	}
	docs := resources(o.Resources)
	nFiles := (len(docs) + perFile - 1) / perFile
	if nFiles < 2 {
		nFiles = 2
	}
	nSub := max(1, nFiles/5)
	per := (len(docs) + nFiles - 1) / nFiles
	for f := 0; f < nFiles; f++ {
		lo, hi := f*per, min((f+1)*per, len(docs))
		if lo >= hi {
			break
		}
		name := fmt.Sprintf("app-%03d.yaml", f)
		if f >= nFiles-nSub {
			name = fmt.Sprintf("db/db-%03d.yaml", f)
		}
		files[name] = strings.Join(docs[lo:hi], "---\n")
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("pkggen: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return fmt.Errorf("pkggen: %w", err)
		}
	}
	return nil
}

func kptfile(fn func(string) (string, string)) string {
	entry := func(fixture string) string {
		k, v := fn(fixture)
		return fmt.Sprintf("    - %s: %s\n", k, v)
	}
	var b strings.Builder
	b.WriteString("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bench\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\n")
	b.WriteString("info:\n  description: issue 13's realistic package (test/bench/pkggen)\n")
	b.WriteString("pipeline:\n  mutators:\n")
	b.WriteString(entry(Fixtures[0]) + "      configPath: setters.yaml\n")
	b.WriteString(entry(Fixtures[1]) + "      configMap:\n        namespace: " + Namespace + "\n")
	b.WriteString(entry(Fixtures[2]) + "      configMap:\n")
	for _, k := range sortedKeys(Labels) {
		fmt.Fprintf(&b, "        %s: %s\n", k, Labels[k])
	}
	b.WriteString("  validators:\n")
	b.WriteString(entry(Fixtures[3]) + "      configMap:\n        require-labels: " + strings.Join(sortedKeys(Labels), ",") + "\n        require-namespace: \"true\"\n")
	return b.String()
}

func settersYAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: setters\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\ndata:\n")
	for _, k := range sortedKeys(Setters) {
		fmt.Fprintf(&b, "  %s: %q\n", k, Setters[k])
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// resources are the n documents, an application's Deployment, Service and
// ConfigMap next to each other while all three kinds last.
func resources(n int) []string {
	nd, ns := n*4/10, n*3/10
	nc := n - nd - ns
	var docs []string
	for i := 0; len(docs) < n; i++ {
		app := fmt.Sprintf("app-%04d", i)
		if i < nd {
			docs = append(docs, fmt.Sprintf(deployment, app, i%3+1))
		}
		if i < ns {
			docs = append(docs, fmt.Sprintf(service, app))
		}
		if i < nc {
			docs = append(docs, fmt.Sprintf(configMap, app))
		}
	}
	return docs
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels:
    app: %[1]s
spec:
  replicas: %[2]d # kpt-set: ${replicas}
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
        - name: app
          image: registry.example.com/team/%[1]s:v1.0.0 # kpt-set: ${registry}/%[1]s:${tag}
          args:
            - --port=8080
            - --log-level=info # kpt-set: --log-level=${log-level}
          ports:
            - containerPort: 8080
              name: http
          resources:
            limits:
              cpu: 500m
              memory: 256Mi
`

const service = `apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  labels:
    app: %[1]s
spec:
  selector:
    app: %[1]s
  ports:
    - name: http
      port: 80
      targetPort: http
`

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s-config
  labels:
    app: %[1]s
data:
  # the level the application starts with; the Deployment's setter overrides it
  LOG_LEVEL: info
  FEATURES: "search,export"
  app.properties: |
    server.port=8080
    cache.size=256
`
