package privdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpen: a fresh directory is created with Perm and opened; a link, a
// file, a directory others may reach are refused, and a link's target is
// left as it was.
func TestOpen(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	fresh := filepath.Join(base, "fresh")
	r, err := Open(fresh, Options{Perm: 0o700})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if st, _ := os.Stat(fresh); st == nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("fresh directory: %v", st)
	}

	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o755)
	for path, want := range map[string]string{link: "is a symbolic link", file: "is not a directory", open: "has mode 0755"} {
		if r, err := Open(path, Options{Perm: 0o700}); err == nil || !IsUntrusted(err) || !strings.Contains(err.Error(), want) {
			if r != nil {
				r.Close()
			}
			t.Errorf("%s: %v; want an UntrustedError saying %q", path, err, want)
		}
		if err := Check(path, Options{Perm: 0o700}); err == nil {
			t.Errorf("Check accepted %s", path)
		}
	}
	// MaxPerm accepts what it says; SetPerm narrows through the handle
	if r, err := Open(open, Options{Perm: 0o700, MaxPerm: 0o755}); err != nil {
		t.Errorf("MaxPerm 0755: %v", err)
	} else {
		r.Close()
	}
	if r, err := Open(open, Options{Perm: 0o711, SetPerm: true}); err != nil {
		t.Errorf("SetPerm: %v", err)
	} else {
		r.Close()
	}
	if st, _ := os.Stat(open); st.Mode().Perm() != 0o711 {
		t.Errorf("SetPerm left mode %v", st.Mode())
	}
	if ents, _ := os.ReadDir(target); len(ents) != 1 {
		t.Fatalf("the link's target changed: %v", ents)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o700 {
		t.Fatalf("the link's target was re-moded: %v", st.Mode())
	}
}

// TestOpenOwner needs root: a directory of another uid is refused, one of
// root's only with AllowRoot.
func TestOpenOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown)")
	}
	d := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(d, 999, 999)
	if _, err := Open(d, Options{}); err == nil || !strings.Contains(err.Error(), "owned by uid 999") {
		t.Fatalf("another user's directory: %v", err)
	}
}
