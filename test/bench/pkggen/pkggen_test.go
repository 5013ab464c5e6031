package pkggen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
)

// TestWrite: the mix of kinds, the setter comments, the subpackage, and the
// same bytes every time.
func TestWrite(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := Write(d, Options{Resources: 500}); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := kio.LocalPackageReader{PackagePath: a, MatchFilesGlob: []string{"*.yaml"}}.Read()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	setterComments := 0
	for _, n := range nodes {
		if n.GetName() == "setters" {
			continue
		}
		kinds[n.GetKind()]++
		s, _ := n.String()
		setterComments += strings.Count(s, "# kpt-set: ")
	}
	if kinds["Deployment"] != 200 || kinds["Service"] != 150 || kinds["ConfigMap"] != 150 {
		t.Errorf("kinds = %v, want 200 Deployments, 150 Services, 150 ConfigMaps", kinds)
	}
	if setterComments != 600 {
		t.Errorf("%d setter comments, want 3 per Deployment", setterComments)
	}
	sub, _ := filepath.Glob(filepath.Join(a, "db", "*.yaml"))
	top, _ := filepath.Glob(filepath.Join(a, "*.yaml"))
	if len(sub) < 2 || len(top) < 10 {
		t.Errorf("%d files in db/, %d at the top: want the resources spread over several files and a subpackage", len(sub), len(top))
	}
	err = filepath.WalkDir(a, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes (%v)", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteExecKptfile(t *testing.T) {
	d := t.TempDir()
	err := Write(d, Options{Resources: 10, Function: func(f string) (string, string) { return "exec", "/opt/fn/" + f }})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := os.ReadFile(filepath.Join(d, "Kptfile"))
	for _, f := range Fixtures {
		if !strings.Contains(string(k), "- exec: /opt/fn/"+f+"\n") {
			t.Errorf("Kptfile does not run %s by exec:\n%s", f, k)
		}
	}
	if err := Write(d, Options{Resources: 10}); err == nil {
		t.Error("Write into a non-empty directory succeeded")
	}
}
