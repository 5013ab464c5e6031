package kpt

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var shared runner

func TestMain(m *testing.M) {
	code, err := setup()
	if err != nil {
		os.Stderr.WriteString("e2e setup: " + err.Error() + "\n")
		os.Exit(1)
	}
	if code >= 0 {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// setup builds kptr once and links it as `kpt`.
func setup() (int, error) {
	dir, err := os.MkdirTemp("", "kptr-e2e-bin-")
	if err != nil {
		return 0, err
	}
	_, file, _, _ := runtime.Caller(0)
	here := filepath.Dir(file)
	repo := filepath.Join(here, "..", "..", "..")
	bin := filepath.Join(dir, "kptr")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kptr")
	build.Dir = repo
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, err
	}
	for name, pkg := range fixtureBinaries {
		b := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./test/fixtures/"+pkg)
		b.Dir = repo
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return 0, err
		}
	}
	if err := os.Symlink(bin, filepath.Join(dir, "kpt")); err != nil {
		return 0, err
	}
	env := []string{}
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "PATH=") || strings.HasPrefix(e, "KPTR_") || strings.HasPrefix(e, "KPT_") {
			continue
		}
		env = append(env, e)
	}
	env = append(env, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KPTR_CACHE_DIR="+filepath.Join(dir, "cache"), "KPTR_STATE_DIR="+filepath.Join(dir, "state"),
		"FIXTURES="+filepath.Join(repo, "test", "fixtures"))
	shared = runner{binDir: dir, env: env, cwd: here}
	return -1, nil
}

// fixtureBinaries are put on PATH for the cases' exec functions.
var fixtureBinaries = map[string]string{
	"fx":                 "kptr-fx",
	"fx-set-labels":      "set-labels",
	"fx-set-annotations": "set-annotations",
	"fx-generator":       "generator",
	"fx-set-namespace":   "set-namespace",
}

// catalogCases need the real catalog images (their expectations come from
// them); they document the format and are skipped here.
var catalogCases = map[string]bool{
	"fn-render/basicpipeline":           true,
	"fn-render/fnresult-fn-success":     true,
	"fn-render/out-of-place-stdout":     true,
	"fn-render/selectors/basicpipeline": true,
	"fn-render/subpkgs":                 true,
}

func TestFnRender(t *testing.T) { runAll(t, "fn-render", "render") }
func TestFnEval(t *testing.T)   { runAll(t, "fn-eval", "eval") }

func runAll(t *testing.T, sub, cmd string) {
	cases := findCases(t, filepath.Join(shared.cwd, "testdata", sub), cmd)
	for _, tc := range cases {
		if tc.cfg.NeedsImages && !catalogCases[sub+"/"+tc.name] && !tc.cfg.CatalogOnly {
			primeImages(t)
			break
		}
	}
	for _, tc := range cases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			if catalogCases[sub+"/"+tc.name] || tc.cfg.CatalogOnly {
				t.Skip("needs the real catalog images; kept to show the format")
			}
			if tc.cfg.NeedsImages {
				needImages(t)
			}
			t.Parallel()
			shared.run(t, tc)
		})
	}
}

// needImages checks the fixture images are in the registry (images_test.go).
func needImages(t *testing.T) { t.Helper(); ensureImages(t) }
