package cache

import (
	"errors"
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

// A docker archive saved without a name says how to save it with one, as
// the user's input to fix (exit code 2).
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
	var ce *Error
	if !errors.As(err, &ce) || ce.ExitCode() != 2 || !strings.Contains(err.Error(), "has no RepoTags: save it by name (docker save REPO:TAG") {
		t.Fatalf("untagged archive: %v (want exit code 2)", err)
	}
}

// A layout whose entries are named by a tag only (skopeo's oci:DIR:TAG),
// imported without --repository, is the user's input to fix: exit code 2
// and a message that names the flag; with the repository it imports.
func TestImportOfATagOnlyLayoutIsAUsageError(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/tagonly:v1"
	push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "tag-only")), ref)
	src := openTest(t, "")
	if _, err := src.Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(t.TempDir(), "layout")
	if err := src.Export(ctx, []string{ref}, layout, false, nil); err != nil {
		t.Fatal(err)
	}
	// rename the entry to its tag alone, as skopeo copy ... oci:DIR:v1 names it
	idx := filepath.Join(layout, "index.json")
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	tagOnly := strings.ReplaceAll(string(b), `"`+ref+`"`, `"v1"`)
	if tagOnly == string(b) {
		t.Fatalf("no entry named %s in %s", ref, b)
	}
	if err := os.WriteFile(idx, []byte(tagOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = openTest(t, "").Import(ctx, layout)
	var ce *Error
	if !errors.As(err, &ce) || ce.ExitCode() != 2 || !strings.Contains(err.Error(), "--repository") {
		t.Fatalf("tag-only layout without --repository: %v (want exit code 2 naming --repository)", err)
	}
	refs, err := openTest(t, "").Import(ctx, layout, ImportRepository(reg.Host+"/fn/tagonly"))
	if err != nil || len(refs) != 1 || refs[0] != ref {
		t.Fatalf("with --repository: %v %v", refs, err)
	}
}
