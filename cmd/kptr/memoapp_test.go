package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kptr-dev/kptr/memo"
)

// hashTree keys a whole app: any change of a file's content, mode or name,
// or a new file or directory, is another key; a tree with a symbolic link
// is not memoised as a whole.
func TestHashTreeKeysEveryChange(t *testing.T) {
	key := func(dir string) (memo.Key, bool) {
		k := memo.NewKey("test")
		ok := hashTree(k, dir)
		return k.Sum(), ok
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"Kptfile": "kind: Kptfile\n", "sub/a.yaml": "a: 1\n"})
	base, ok := key(dir)
	if !ok {
		t.Fatal("a plain tree was refused")
	}
	if again, _ := key(dir); again != base {
		t.Fatal("the same tree keyed differently")
	}
	seen := map[memo.Key]string{base: "base"}
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"content", func() error { return os.WriteFile(filepath.Join(dir, "sub/a.yaml"), []byte("a: 2\n"), 0o644) }},
		{"mode", func() error { return os.Chmod(filepath.Join(dir, "sub/a.yaml"), 0o600) }},
		{"rename", func() error { return os.Rename(filepath.Join(dir, "sub/a.yaml"), filepath.Join(dir, "sub/b.yaml")) }},
		{"new file", func() error { return os.WriteFile(filepath.Join(dir, "c.yaml"), nil, 0o644) }},
		{"empty dir", func() error { return os.Mkdir(filepath.Join(dir, "d"), 0o755) }},
	} {
		name := c.name
		if err := c.change(); err != nil {
			t.Fatal(err)
		}
		k, ok := key(dir)
		if !ok {
			t.Fatalf("%s: tree refused", name)
		}
		if prev, dup := seen[k]; dup {
			t.Fatalf("%s: same key as %s", name, prev)
		}
		seen[k] = name
	}
	if err := os.Symlink("c.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, ok := key(dir); ok {
		t.Fatal("a tree with a symbolic link was memoised as a whole")
	}
}
