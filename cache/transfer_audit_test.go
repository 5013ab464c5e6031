package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Importing a file that is not a tarball (a YAML file, a truncated transfer)
// says what import expects instead of a bare "unexpected EOF", and leaves the
// cache empty and its temporary area clean.
func TestImportOfANonTarballSaysWhatItWants(t *testing.T) {
	dir := t.TempDir()
	c := openTest(t, dir)
	src := filepath.Join(t.TempDir(), "functions.yaml")
	if err := os.WriteFile(src, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refs, err := c.Import(ctx, src)
	if err == nil || len(refs) != 0 {
		t.Fatalf("import of a YAML file: %v %v", refs, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, src) || !strings.Contains(msg, "not a complete tarball") || !strings.Contains(msg, "docker-archive tarball") || strings.Contains(msg, "\n") {
		t.Errorf("message: %q", msg)
	}
	if imgs, err := c.List(ctx); err != nil || len(imgs) != 0 {
		t.Errorf("cache after a failed import: %v %v", imgs, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Errorf("temporaries left: %v", ents)
	}
}

// A docker archive saved without a name says how to save it with one.
func TestImportOfAnUntaggedDockerArchive(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("manifest.json", `[{"Config":"abc.json","RepoTags":null,"Layers":[]}]`)
	writeFile("abc.json", `{}`)
	_, err := openTest(t, "").Import(ctx, dir)
	if err == nil || !strings.Contains(err.Error(), "has no RepoTags: save it by name (docker save REPO:TAG") {
		t.Fatalf("untagged archive: %v", err)
	}
}
