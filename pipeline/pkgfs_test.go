package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// resolve follows links that stay inside the package and refuses every
// way out (Argo CD util/io/files style: a table of good and bad fixtures).
func TestResolveInPackage(t *testing.T) {
	dir := writeTree(t, map[string]string{"real/a.yaml": "a\n", "file.yaml": "f\n"})
	outside := t.TempDir()
	links := map[string]string{
		"in-dir":     "real",
		"in-file":    "real/a.yaml",
		"up-and-in":  "real/../real",
		"chain":      "in-dir",
		"out-abs":    outside,
		"out-rel":    "../..",
		"abs-inside": filepath.Join(dir, "real"), // absolute: os.Root refuses it too
		"loop":       "loop",
		"real/up":    "..",
		"real/out":   "../../x",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := openPkgFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cases := []struct{ in, want, err string }{
		{"file.yaml", "file.yaml", ""},
		{"new/dir/x.yaml", "new/dir/x.yaml", ""},
		{"in-dir/x.yaml", "real/x.yaml", ""},
		{"in-file", "real/a.yaml", ""},
		{"up-and-in/a.yaml", "real/a.yaml", ""},
		{"chain/a.yaml", "real/a.yaml", ""},
		{"real/up/file.yaml", "file.yaml", ""},
		{"out-abs/x.yaml", "", "outside the package"},
		{"out-rel/x.yaml", "", "outside the package"},
		{"abs-inside/a.yaml", "", "outside the package"},
		{"loop/x", "", "outside the package"},
		{"real/out", "", "outside the package"},
		{"../x.yaml", "", "outside the package"},
		{"file.yaml/x.yaml", "", "is not a directory"},
	}
	for _, c := range cases {
		got, err := p.resolve(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("resolve(%q) = %q, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("resolve(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// Output paths are checked before anything is staged: what no file name
// may hold or what leaves the package fails with the path named, and the
// package stays as it was; kpt's absolute paths are mapped inside by render.
func TestOutputPathChecks(t *testing.T) {
	cases := []struct{ path, err string }{
		{"a.yaml", ""},
		{"./sub/../b.yaml", ""},
		{"nul\x00.yaml", `"nul\x00.yaml" contains a control character`},
		{"esc\x1b]52;c;x\x07.yaml", "contains a control character"},
		{"del\x7f.yaml", "contains a control character"},
		{"../x.yaml", "must not modify resources outside of package"},
		{"a/../../x.yaml", "must not modify resources outside of package"},
		{"/etc/x.yaml", "package paths may not be absolute paths"},
		{".kptr-tx/journal", "inside kptr's staging area"},
		{strings.Repeat("n", 256) + ".yaml", "longer than 255 bytes"},
	}
	for _, c := range cases {
		_, err := outputPath(c.path)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("outputPath(%q): %v, want %q", c.path, err, c.err)
		}
	}
}

// Writes never follow a link out of the package: a resource path through a
// symlinked directory that leaves it fails naming the path, a symlinked
// file that leaves it is neither written through nor has its mode changed;
// links that stay inside are written through, as kpt writes them.
func TestWritesStayInPackage(t *testing.T) {
	outside := writeTree(t, map[string]string{"target.yaml": "outside\n"})
	if err := os.Chmod(filepath.Join(outside, "target.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, link, target, write, err, wantFile string
	}{
		{"dir out", "link", outside, "link/x.yaml", "failed to save resources: link/x.yaml: symbolic link link leads outside the package", ""},
		{"file out", "out.yaml", filepath.Join(outside, "target.yaml"), "out.yaml", "out.yaml: symbolic link to a location outside the package", ""},
		{"dir in", "link", "real", "link/x.yaml", "", "real/x.yaml"},
		{"file in", "in.yaml", "real/t.yaml", "in.yaml", "", "real/t.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTree(t, map[string]string{"real/t.yaml": "old\n"})
			if err := os.Symlink(c.target, filepath.Join(dir, c.link)); err != nil {
				t.Fatal(err)
			}
			outBefore := lsnapshot(t, outside)
			err := commitFiles(dir, map[string][]byte{c.write: []byte("new\n")}, nil)
			if !equalTrees(lsnapshot(t, outside), outBefore) {
				t.Fatalf("outside changed: %v", lsnapshot(t, outside))
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				if _, err := os.Lstat(filepath.Join(dir, txDirName)); !os.IsNotExist(err) {
					t.Fatal("staging left behind")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, c.wantFile)); string(b) != "new\n" {
				t.Fatalf("%s = %q", c.wantFile, b)
			}
			if st, err := os.Lstat(filepath.Join(dir, c.link)); err != nil || st.Mode()&os.ModeSymlink == 0 {
				t.Fatal("the link was replaced")
			}
		})
	}
}

// Reads never follow a link out of the package (kptr generate must never
// print an outside file), FIFOs are not read, and no error quotes the
// contents of a file, inside the package or out.
func TestReadsStayInPackage(t *testing.T) {
	const secret = "root:x:0:0:SECRET-CONTENT:/root:/bin/bash"
	outside := writeTree(t, map[string]string{
		"passwd":      secret + "\n",
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: outside-SECRET-CONTENT\n",
		"dir/x.yaml":  "apiVersion: v1\nkind: Secret\nmetadata:\n  name: outside-dir-SECRET-CONTENT\n",
	})
	kf := kptfile("app", "")
	good := fmt.Sprintf(cm, "a")
	cases := []struct {
		name  string
		files map[string]string
		links map[string]string
		fifo  string
		err   string
	}{
		{"file linked out", map[string]string{"Kptfile": kf}, map[string]string{"secret.yaml": filepath.Join(outside, "secret.yaml")}, "", "secret.yaml: symbolic link to a location outside the package"},
		{"non-YAML file linked out", map[string]string{"Kptfile": kf}, map[string]string{"passwd.yaml": filepath.Join(outside, "passwd")}, "", "passwd.yaml: symbolic link to a location outside the package"},
		{"Kptfile linked out", nil, map[string]string{"Kptfile": filepath.Join(outside, "passwd")}, "", "Kptfile: symbolic link to a location outside the package"},
		{"non-YAML file inside", map[string]string{"Kptfile": kf, "bad.yaml": secret + "\n"}, nil, "", "bad.yaml"},
		{"bad Kptfile inside", map[string]string{"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: [" + secret + "\n"}, nil, "", "Kptfile"},
		{"FIFO", map[string]string{"Kptfile": kf}, nil, "fifo.yaml", "fifo.yaml: not a regular file"},
		{"directory linked out is skipped, as kpt skips linked directories", map[string]string{"Kptfile": kf, "a.yaml": good}, map[string]string{"dir": filepath.Join(outside, "dir")}, "", ""},
		{"file linked inside is read, as kpt reads it", map[string]string{"Kptfile": kf, "real/a.yaml": good}, map[string]string{"a.yaml": "real/a.yaml"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTree(t, c.files)
			os.MkdirAll(dir, 0o755)
			for l, target := range c.links {
				if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
					t.Fatal(err)
				}
			}
			if c.fifo != "" {
				if err := syscall.Mkfifo(filepath.Join(dir, c.fifo), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, output := range []string{OutputMemory, OutputInPlace} {
				out, err := Render(context.Background(), dir, Options{Output: output})
				if c.err == "" {
					if err != nil {
						t.Fatalf("%s: %v", output, err)
					}
					for _, n := range out.Resources {
						if strings.Contains(n.MustString(), "outside") {
							t.Fatalf("%s: read an outside file: %s", output, n.MustString())
						}
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("%s: error %v, want %q", output, err, c.err)
				}
				t.Logf("%s: %v", output, err)
				if strings.Contains(err.Error(), "SECRET") {
					t.Fatalf("%s: the error quotes file contents: %v", output, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "Kptfile")); strings.Contains(string(b), "SECRET") && !strings.Contains(c.name, "Kptfile") {
				t.Fatalf("the Kptfile status quotes file contents:\n%s", b)
			}
		})
	}
}

// Reading a package tree costs a few name lookups a directory, whatever its
// depth (issue 30: a package 1,000 directories deep took 10.8 s of CPU,
// each lookup resolving every component of its path from the package's
// root): finding the subpackages, reading the package's files (kyaml's walk,
// its Kptfile and .krmignore lookups) and listing its images.
func TestPackageWalkLinearInDepth(t *testing.T) {
	const levels = 1000
	dir := writeTree(t, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
	})
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < levels; i++ { // made from each parent: by path, making them is quadratic too
		if err := r.Mkdir("d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := r.OpenRoot("d")
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		r = next
	}
	if err := r.WriteFile("deep.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Close()
	fsys, err := openPkgFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	pn := &pkgNode{fs: fsys, dir: dir, rel: ".", display: "app"}
	if err := pn.loadKptfile(); err != nil {
		t.Fatal(err)
	}
	if subs, err := pn.subpackages(pn); err != nil || len(subs) != 0 {
		t.Fatalf("subpackages: %v, %v", subs, err)
	}
	nodes, err := pn.localResources()
	if err != nil || len(nodes) != 3 {
		t.Fatalf("localResources: %d resources, %v; want 3 (the Kptfile, cm.yaml, the deepest directory's deep.yaml)", len(nodes), err)
	}
	if _, err := images(fsys, &Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d name components resolved for %d levels", fsys.files.Components, levels)
	if per := fsys.files.Components / levels; per > 20 {
		t.Errorf("%d name components resolved for %d levels (%d a level): a lookup grows with the depth of its name", fsys.files.Components, levels, per)
	}
}
