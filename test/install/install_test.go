// Package install tests the Makefile's install, install-kpt-link, install-docker-link and
// uninstall targets: staged with DESTDIR into a temporary directory, with the
// binary built there too (BIN), so the work tree's bin/kptr is not touched.
package install

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const prefix = "/opt/kptr-test"

// makeTarget runs `make TARGET` in the repository with DESTDIR and PREFIX set
// and the binary built at bin; it returns the combined output and the error.
func makeTarget(t *testing.T, target, destdir, bin string) (string, error) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", root, target,
		"DESTDIR="+destdir, "PREFIX="+prefix, "BIN="+bin)
	cmd.Env = withoutMake(os.Environ())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// files lists every path under dir (relative, with "/" after directories'
// names left out) and, for symbolic links, " -> TARGET".
func files(t *testing.T, dir string) []string {
	t.Helper()
	var got []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel += " -> " + target
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	return got
}

func TestInstallStagesBinaryAndCompletions(t *testing.T) {
	dest := t.TempDir()
	bin := filepath.Join(t.TempDir(), "kptr")
	if out, err := makeTarget(t, "install", dest, bin); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	p := dest + prefix
	want := []string{
		"opt/kptr-test/bin/kptr",
		"opt/kptr-test/libexec/kptr/kptr-sigverify",
		"opt/kptr-test/share/bash-completion/completions/kptr",
		"opt/kptr-test/share/fish/vendor_completions.d/kptr.fish",
		"opt/kptr-test/share/kptr/installed-dirs",
		"opt/kptr-test/share/zsh/site-functions/_kptr",
	}
	if got := files(t, dest); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("installed files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	st, err := os.Stat(p + "/bin/kptr")
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("bin/kptr: %v, mode %v, want 0755", err, st.Mode())
	}
	// the signature verifier where kptr looks for it, off PATH
	if st, err := os.Stat(p + "/libexec/kptr/kptr-sigverify"); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("libexec/kptr/kptr-sigverify: %v, want mode 0755", err)
	}
	out, err := exec.Command(p+"/bin/kptr", "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "kptr ") {
		t.Fatalf("installed kptr version: %v, %q", err, out)
	}
	// Each completion is cobra's script for kptr in that shell's own syntax.
	for file, marker := range map[string]string{
		"share/bash-completion/completions/kptr":    "complete -o default -F __start_kptr kptr",
		"share/zsh/site-functions/_kptr":            "#compdef kptr",
		"share/fish/vendor_completions.d/kptr.fish": "complete -c kptr ",
	} {
		b, err := os.ReadFile(filepath.Join(p, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), marker) {
			t.Errorf("%s lacks %q", file, marker)
		}
		if st, _ := os.Stat(filepath.Join(p, file)); st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", file, st.Mode().Perm())
		}
	}

	// install-kpt-link adds kpt -> kptr next to it, relative so the staged
	// tree works wherever it is unpacked; invoked through it, kptr is kpt.
	if out, err := makeTarget(t, "install-kpt-link", dest, bin); err != nil {
		t.Fatalf("make install-kpt-link: %v\n%s", err, out)
	}
	if target, err := os.Readlink(p + "/bin/kpt"); err != nil || target != "kptr" {
		t.Fatalf("bin/kpt: %q, %v; want a link to kptr", target, err)
	}
	out, err = exec.Command(p+"/bin/kpt", "version").Output()
	if err != nil || strings.HasPrefix(string(out), "kptr ") || !strings.Contains(string(out), "\nkptr ") {
		t.Fatalf("kpt version through the link: %v, %q; want kpt's release line, then kptr's", err, out)
	}

	if out, err := makeTarget(t, "uninstall", dest, bin); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	if got := files(t, dest); len(got) != 0 {
		t.Errorf("left after uninstall: %v", got)
	}
	// and the directories install created, now empty (DESTDIR itself was there)
	if entries, err := os.ReadDir(dest); err != nil || len(entries) != 0 {
		t.Errorf("directories left after uninstall: %v %v", entries, err)
	}
}

// Uninstall removes only the directories install created: one that was
// there before stays, even empty.
func TestUninstallKeepsDirectoriesItFound(t *testing.T) {
	dest := t.TempDir()
	bin := filepath.Join(t.TempDir(), "kptr")
	if err := os.MkdirAll(dest+prefix+"/bin", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"install", "uninstall"} {
		if out, err := makeTarget(t, target, dest, bin); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	if _, err := os.Stat(dest + prefix + "/bin"); err != nil {
		t.Errorf("the bin directory that existed before install: %v", err)
	}
	if _, err := os.Stat(dest + prefix + "/share"); !os.IsNotExist(err) {
		t.Errorf("share/, which install created: %v, want removed", err)
	}
}

// A real install (no DESTDIR) of the kpt link where another kpt is on
// PATH: refused without FORCE=1, naming it; with FORCE=1 installed, saying
// which kpt it shadows (issue 32: it put kpt first ahead of /usr/bin/kpt
// without a word).
func TestInstallKptLinkSaysWhatItShadows(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pfx, other := t.TempDir(), t.TempDir()
	bin := filepath.Join(t.TempDir(), "kptr")
	if err := os.WriteFile(filepath.Join(other, "kpt"), []byte("#!/bin/sh\necho the real kpt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(force bool) (string, error) {
		args := []string{"--no-print-directory", "-C", root, "install-kpt-link", "DESTDIR=", "PREFIX=" + pfx, "BIN=" + bin}
		if force {
			args = append(args, "FORCE=1")
		}
		cmd := exec.Command("make", args...)
		cmd.Env = append(withoutMake(os.Environ()), "PATH="+pfx+"/bin:"+other+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(false)
	if err == nil || !strings.Contains(out, "another kpt is on PATH ("+other+"/kpt") {
		t.Fatalf("without FORCE: %v\n%s", err, out)
	}
	if _, err := os.Lstat(pfx + "/bin/kpt"); !os.IsNotExist(err) {
		t.Fatalf("the link was made although refused: %v", err)
	}
	out, err = run(true)
	if err != nil || !strings.Contains(out, "it shadows "+other+"/kpt") || !strings.Contains(out, ": kpt now runs kptr") {
		t.Fatalf("with FORCE=1: %v\n%s", err, out)
	}
}

func TestInstallKptLinkKeepsAnotherKpt(t *testing.T) {
	dest := t.TempDir()
	bin := filepath.Join(t.TempDir(), "kptr")
	kpt := dest + prefix + "/bin/kpt"
	if err := os.MkdirAll(filepath.Dir(kpt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kpt, []byte("#!/bin/sh\necho the real kpt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := makeTarget(t, "install-kpt-link", dest, bin)
	if err == nil || !strings.Contains(out, kpt+" exists and is not a link to kptr") {
		t.Fatalf("make install-kpt-link over a kpt binary: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(kpt); err != nil || string(b) != "#!/bin/sh\necho the real kpt\n" {
		t.Fatalf("the existing kpt changed: %q, %v", b, err)
	}
	// uninstall removes kptr and leaves that kpt alone.
	if out, err := makeTarget(t, "uninstall", dest, bin); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	if got := files(t, dest); strings.Join(got, " ") != "opt/kptr-test/bin/kpt" {
		t.Errorf("after uninstall: %v, want only the other kpt", got)
	}
}

// withoutMake drops the variables a make running `go test` passes down
// (MAKEFLAGS, MFLAGS, MAKELEVEL): the make this test starts is its own.
func withoutMake(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			out = append(out, kv)
		}
	}
	return out
}

// install-docker-link puts docker -> kptr where no docker command exists:
// through it kptr answers as docker (docs/docker.md); a docker file there,
// or a docker on PATH (without DESTDIR), is never shadowed; uninstall
// removes only the link.
func TestInstallDockerLink(t *testing.T) {
	dest := t.TempDir()
	bin := filepath.Join(t.TempDir(), "kptr")
	if out, err := makeTarget(t, "install-docker-link", dest, bin); err != nil {
		t.Fatalf("make install-docker-link: %v\n%s", err, out)
	}
	p := dest + prefix
	if target, err := os.Readlink(p + "/bin/docker"); err != nil || target != "kptr" {
		t.Fatalf("bin/docker: %q, %v; want a link to kptr", target, err)
	}
	out, err := exec.Command(p+"/bin/docker", "version", "--format", "{{.Client.Version}}").Output()
	if err != nil || !strings.HasSuffix(string(out), "+kptr\n") {
		t.Fatalf("docker version through the link: %v, %q", err, out)
	}
	if out, err := makeTarget(t, "uninstall", dest, bin); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	if got := files(t, dest); len(got) != 0 {
		t.Errorf("left after uninstall: %v", got)
	}

	// an existing docker in the directory
	docker := dest + prefix + "/bin/docker"
	if err := os.MkdirAll(filepath.Dir(docker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(docker, []byte("#!/bin/sh\necho the real docker\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := makeTarget(t, "install-docker-link", dest, bin); err == nil || !strings.Contains(out, docker+" exists and is not a link to kptr") {
		t.Fatalf("over a docker binary: %v\n%s", err, out)
	}
	// a docker on PATH, installing for this machine (no DESTDIR)
	root, _ := filepath.Abs("../..")
	other := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "install-docker-link", "DESTDIR=", "PREFIX="+other, "BIN="+bin)
	cmd.Env = append(withoutMake(os.Environ()), "PATH="+filepath.Dir(docker)+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "a docker command exists ("+docker+")") {
		t.Fatalf("with a docker on PATH: %v\n%s", err, out)
	}
	if _, err := os.Lstat(other + "/bin/docker"); err == nil {
		t.Errorf("a docker link was made although a docker is on PATH")
	}
}
