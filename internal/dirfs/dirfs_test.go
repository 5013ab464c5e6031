package dirfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nested makes levels nested directories d/d/... under dir, a file f in
// each, and returns the deepest one's name relative to dir (each made from
// its parent's handle: by whole paths, making them costs what the issue is
// about).
func nested(t *testing.T, dir string, levels int) string {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < levels; i++ {
		err := r.Mkdir("d", 0o755)
		if err == nil {
			var next *os.Root
			next, err = r.OpenRoot("d")
			r.Close()
			r = next
		}
		if err == nil {
			err = r.WriteFile("f", []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	return strings.TrimSuffix(strings.Repeat("d/", levels), "/")
}

// open opens dir as an os.Root and its FS, both closed when the test ends.
func open(t *testing.T, dir string) (*os.Root, *FS) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := New(root)
	t.Cleanup(func() {
		f.Close()
		root.Close()
	})
	return root, f
}

// A walk that reads every directory, stats a file that is absent in each
// (a Kptfile lookup) and reads every file costs a few component lookups
// per name, not one per component of its path: an os.Root resolves about
// levels²/2 for each such lookup (issue 30), FS under 10 a level.
func TestWalkIsLinearInDepth(t *testing.T) {
	const levels = 1000
	dir := t.TempDir()
	nested(t, dir, levels)
	_, f := open(t, dir)
	dirs, files := 0, 0
	err := fs.WalkDir(f, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, err := d.Info(); err != nil {
			return err
		}
		if d.IsDir() {
			dirs++
			if _, err := f.Stat(filepath.Join(name, "Kptfile")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Stat of an absent file in %s: %v, want not exist", name, err)
			}
			return nil
		}
		files++
		b, err := fs.ReadFile(f, name)
		if err != nil || string(b) != "x" {
			t.Fatalf("%s: %q, %v", name, b, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dirs != levels+1 || files != levels {
		t.Fatalf("walked %d directories and %d files, want %d and %d", dirs, files, levels+1, levels)
	}
	t.Logf("%d components resolved for %d levels", f.Components, levels)
	if per := f.Components / levels; per > 10 {
		t.Errorf("%d components resolved for %d levels (%d a level): a name's lookup grows with its depth", f.Components, levels, per)
	}
	if held := len(f.chain); held > maxHeld+levels/checkpoint {
		t.Errorf("%d directories held open, want at most %d", held, maxHeld+levels/checkpoint)
	}
}

// Every answer is the root's: a link to another directory of the root is
// followed (resolved from the root when it leaves the held directory), a
// link out of the root is refused, an absent name is absent.
func TestAnswersAreTheRoots(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	nested(t, dir, 3)
	for link, target := range map[string]string{
		"d/d/up":  "../f",                               // inside the root, outside d/d
		"d/d/out": filepath.Join(outside, "secret"),     // absolute: out of the root
		"d/d/esc": "../../../" + filepath.Base(outside), // relative: out of the root
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	root, f := open(t, dir)
	if _, err := f.ReadDir("d/d"); err != nil { // hold d/d
		t.Fatal(err)
	}
	read := func(name string) (string, error) {
		r, err := f.Open(name)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	if got, err := read("d/d/up"); err != nil || got != "x" {
		t.Errorf("d/d/up: %q, %v; want the root's d/f", got, err)
	}
	for _, name := range []string{"d/d/out", "d/d/esc/secret"} {
		if got, err := read(name); err == nil {
			t.Errorf("%s: read %q through a link out of the root", name, got)
		}
		_, want := root.Open(name)
		if _, err := read(name); err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("%s: error %v, want the root's %v", name, err, want)
		}
	}
	if _, err := f.Lstat("d/d/nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat of an absent name: %v", err)
	}
	if st, err := f.Lstat("d/d/up"); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat of a link: %v, %v", st, err)
	}
}
