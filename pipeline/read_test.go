package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/pipeline/internal/fileerr"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

func kyamlReadPackage(dir string) ([]*yaml.RNode, error) {
	return kio.LocalPackageReader{PackagePath: dir, PackageFileName: "Kptfile", MatchFilesGlob: matchAllKRM,
		PreserveSeqIndent: true, SetAnnotations: map[string]string{pkgPathAnnotation: dir}, WrapBareSeqNode: true}.Read()
}

func compareRead(t *testing.T, dir string) bool {
	t.Helper()
	want, werr := kyamlReadPackage(dir)
	fsys, err := openPkgFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	got, gerr := readPackage(fsys, ".")
	// kptr's errors are kyaml's without excerpts of the file (fileerr)
	if werr != nil {
		werr = fileerr.YAML(werr)
	}
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Errorf("%s: error %v, kyaml %v", dir, gerr, werr)
		return false
	}
	if werr != nil {
		return true // what was read before the error is not used
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d resources, kyaml %d", dir, len(got), len(want))
		return false
	}
	for i := range want {
		if dw, dg := dump(want[i]), dump(got[i]); dw != dg {
			t.Errorf("%s: resource %d differs:\n--- kyaml\n%s--- kptr\n%s", dir, i, dw, dg)
			return false
		}
		if pw, pg := positions(want[i].Document()), positions(got[i].Document()); pw != pg {
			t.Errorf("%s: resource %d positions differ", dir, i)
			return false
		}
	}
	return true
}

// readPackage reads every directory of the corpora exactly as kyaml's
// LocalPackageReader does: resources, annotations, node styles and tags,
// positions, errors.
func TestReadPackageMatchesKyaml(t *testing.T) {
	n := 0
	for _, root := range corpusDirs {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() != ".git" {
				// the real path, as kpt's and kptr's CLIs hand a package to
				// the reader (CI may put shared/ behind a symbolic link)
				abs, _ := filepath.Abs(p)
				if real, err := filepath.EvalSymlinks(abs); err == nil {
					abs = real
				}
				if compareRead(t, abs) {
					n++
				}
			}
			return nil
		})
	}
	if n < 100 {
		t.Fatalf("only %d directories compared", n)
	}
	t.Logf("%d directories read the same", n)
}

// The shapes the corpora may lack: each file is one package of its own.
func TestReadPackageEdgeCases(t *testing.T) {
	cm := func(name string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" }
	list := "apiVersion: v1\nkind: X\nmetadata:\n  name: l\nspec:\n  xs:\n    - a\n    - b\n"
	pkgs := map[string]map[string]string{
		"multi-doc":       {"a.yaml": cm("a") + "---\n" + cm("b") + "--- # c\n" + cm("c")},
		"crlf":            {"a.yaml": strings.ReplaceAll(cm("a")+"---\n"+cm("b"), "\n", "\r\n")},
		"empty-docs":      {"a.yaml": "---\n" + cm("a") + "---\n---\n" + cm("b") + "---\n"},
		"comments-only":   {"a.yaml": "# nothing\n", "b.yaml": cm("b")},
		"seqindent-carry": {"a.yaml": list + "---\n" + cm("nolist"), "b.yaml": cm("b2"), "c.yaml": strings.ReplaceAll(list, "    - ", "  - ")},
		"bare-list":       {"a.yaml": "- a\n- b\n", "b.yaml": cm("b")},
		"scalar":          {"a.yaml": "just text\n"},
		"json":            {"a.json": `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}`, "b.yaml": cm("b")},
		"annotated":       {"a.yaml": "apiVersion: v1\nkind: X\nmetadata:\n  name: a\n  annotations:\n    config.kubernetes.io/path: other.yaml\n    internal.config.kubernetes.io/index: '5'\n"},
		"empty-metadata":  {"a.yaml": "apiVersion: v1\nkind: X\nmetadata: {}\n"},
		"bad-separator":   {"a.yaml": cm("a") + "--- x\n" + cm("b")},
		"malformed":       {"a.yaml": cm("a"), "b.yaml": "a: b: c\n"},
		"krmignore":       {"a.yaml": cm("a"), "skip.yaml": cm("s"), ".krmignore": "skip.yaml\n", "other.txt": "x: y\n"},
		"subpackage":      {"a.yaml": cm("a"), "sub/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\n", "sub/b.yaml": cm("b"), "dir/c.yaml": cm("c")},
		"unicode":         {"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ü\ndata:\n  k: \"\\u00e9\\t\"\n  l: |\n    ä\n"},
	}
	for name, files := range pkgs {
		dir := filepath.Join(t.TempDir(), name)
		for f, body := range files {
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		compareRead(t, dir)
	}
}
