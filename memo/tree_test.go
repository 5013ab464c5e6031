package memo

import (
	"os"
	"path/filepath"
	"testing"
)

// Tree keys a whole package or app: any change of a file's content, mode
// or name, or a new file or directory, is another key; a tree with a
// symbolic link is not memoised as a whole.
func TestTreeKeysEveryChange(t *testing.T) {
	dir := t.TempDir()
	key := func() (Key, bool) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		k := NewKey("test")
		ok := k.Tree(root.FS())
		return k.Sum(), ok
	}
	for name, s := range map[string]string{"Kptfile": "kind: Kptfile\n", "sub/a.yaml": "a: 1\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base, ok := key()
	if !ok {
		t.Fatal("a plain tree was refused")
	}
	if again, _ := key(); again != base {
		t.Fatal("the same tree keyed differently")
	}
	seen := map[Key]string{base: "base"}
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"content", func() error { return os.WriteFile(filepath.Join(dir, "sub/a.yaml"), []byte("a: 2\n"), 0o644) }},
		{"mode", func() error { return os.Chmod(filepath.Join(dir, "sub/a.yaml"), 0o600) }},
		{"rename", func() error { return os.Rename(filepath.Join(dir, "sub/a.yaml"), filepath.Join(dir, "sub/b.yaml")) }},
		{"new file", func() error { return os.WriteFile(filepath.Join(dir, "c.yaml"), nil, 0o644) }},
		{"empty dir", func() error { return os.Mkdir(filepath.Join(dir, "d"), 0o755) }},
		{"dir mode", func() error { return os.Chmod(filepath.Join(dir, "d"), 0o700) }},
		{"dir rename", func() error { return os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")) }},
		{"removed file", func() error { return os.Remove(filepath.Join(dir, "c.yaml")) }},
	} {
		if err := c.change(); err != nil {
			t.Fatal(err)
		}
		k, ok := key()
		if !ok {
			t.Fatalf("%s: tree refused", c.name)
		}
		if prev, dup := seen[k]; dup {
			t.Fatalf("%s: same key as %s", c.name, prev)
		}
		seen[k] = c.name
	}
	if err := os.Symlink("Kptfile", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, ok := key(); ok {
		t.Fatal("a tree with a symbolic link was memoised as a whole")
	}
}
