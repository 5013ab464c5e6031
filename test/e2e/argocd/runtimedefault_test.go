package argocd

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Under the RuntimeDefault seccomp profiles of containerd and CRI-O
// (testdata/runtime-default, sources in SOURCES.md), loaded into a uid-999,
// capability-less, no_new_privs process as a kubelet applies them, kptr
// doctor and real runs agree, for each --sandbox mode: where doctor says a
// tier is usable, `kptr fn render` and `kptr generate` of the demo package
// (examples/demo, its fixture images imported offline) succeed with exactly
// the bytes the namespace tier renders unconfined; where doctor says
// UNAVAILABLE, generate exits 3, fn render fails (exit code 125 for the
// function, as kpt reports a runtime failure) and the package stays as it was.
//
//   - containerd's (Docker's) default refuses user namespaces: auto runs the
//     landlock tier; --sandbox=namespace refuses.
//   - CRI-O's allows them but not sethostname: the namespace tier runs
//     (without setting a hostname: the reported "sethostname: operation not
//     permitted" on every run); so does --sandbox=landlock.
//   - CRI-O's before landlock_* were allowed (2022): the namespace tier runs,
//     --sandbox=landlock refuses.
func TestRuntimeDefaultProfilesDoctorAndRunsAgree(t *testing.T) {
	kptr, base, helper := seccompSetup(t, "kptr-runtimedefault-")
	images := filepath.Join(base, "images")
	goCmd(t, nil, "run", "./examples/build-images", "-out", images)
	chmodTree(t, images)
	unconfined := filepath.Join(base, "unconfined.json")
	os.WriteFile(unconfined, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}`), 0o644)
	profiles := filepath.Join(root, "test/e2e/argocd/testdata/runtime-default")
	containerd := filepath.Join(profiles, "containerd-docker-default.json")
	crio := filepath.Join(profiles, "crio-containers-common.json")
	crioOld := filepath.Join(profiles, "crio-containers-common-4d1476b.json")

	home := ownedDir(t, filepath.Join(base, "home"))
	// KPTR_MEMO=off: generate memoises by default, and a whole-app replay
	// of the reference's generate would start no sandbox at all (memo/README.md);
	// every run here is meant to start one under the profile.
	env := func(sandbox string) []string {
		return []string{"KPTR_MEMO=off",
			"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home,
			"KPTR_CACHE_DIR=" + filepath.Join(home, "cache"), "KPTR_OFFLINE=1",
			"KPTR_ALLOWED_IMAGES=gcr.io/kpt-fn/*", "KPTR_PROGRESS=none", "KPTR_SANDBOX=" + sandbox,
		}
	}
	if _, errs, code := asSidecar(t, helper, unconfined, base, env("auto"), kptr, "cache", "import", images); code != 0 {
		t.Fatalf("cache import: exit %d: %s", code, errs)
	}
	n := 0
	pkgCopy := func() string {
		n++
		d := filepath.Join(base, "pkg", strings.Repeat("x", n))
		if out, err := exec.Command("cp", "-r", filepath.Join(root, "examples/demo"), d).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		if os.Geteuid() == 0 {
			exec.Command("chown", "-R", "999:999", filepath.Join(base, "pkg")).Run()
		}
		return d
	}
	os.MkdirAll(filepath.Join(base, "pkg"), 0o755)
	ownedDir(t, filepath.Join(base, "pkg"))

	// The reference: the namespace tier, unconfined.
	wantTree := pkgCopy()
	if _, errs, code := asSidecar(t, helper, unconfined, wantTree, env("namespace"), kptr, "fn", "render", wantTree); code != 0 {
		t.Fatalf("reference render: exit %d: %s", code, errs)
	}
	want := tree(t, wantTree)
	wantGen, errs, code := asSidecar(t, helper, unconfined, pkgCopy(), env("namespace"), kptr, "generate")
	if code != 0 || !strings.Contains(wantGen, "demo.kptr.dev/rollout: canary") {
		t.Fatalf("reference generate: exit %d: %s\n%s", code, errs, wantGen)
	}

	for _, tc := range []struct {
		name, profile, sandbox string
		tier                   string // "" = doctor must say UNAVAILABLE
	}{
		{"unconfined/landlock", unconfined, "landlock", "landlock"},
		{"containerd/auto", containerd, "auto", "landlock"},
		{"containerd/namespace", containerd, "namespace", ""},
		{"crio/auto", crio, "auto", "namespace"},
		{"crio/landlock", crio, "landlock", "landlock"},
		{"crio-4d1476b/auto", crioOld, "auto", "namespace"},
		{"crio-4d1476b/landlock", crioOld, "landlock", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkg := pkgCopy()
			out, errs, code := asSidecar(t, helper, tc.profile, pkg, env(tc.sandbox), kptr, "doctor")
			report := out + errs
			usable := code == 0 && strings.Contains(report, "sandbox: usable")
			if tc.tier == "" {
				if usable || code != 3 || !strings.Contains(report, "sandbox: UNAVAILABLE") {
					t.Fatalf("doctor: exit %d, want UNAVAILABLE (exit 3):\n%s", code, report)
				}
			} else if !usable || !strings.Contains(report, "tier: "+tc.tier) {
				t.Fatalf("doctor: exit %d, want tier %s:\n%s", code, tc.tier, report)
			}
			before := pkgCopy()
			_, rerrs, rcode := asSidecar(t, helper, tc.profile, pkg, env(tc.sandbox), kptr, "fn", "render", pkg)
			gen, gerrs, gcode := asSidecar(t, helper, tc.profile, pkgCopy(), env(tc.sandbox), kptr, "generate")
			if tc.tier == "" {
				// fn render reports the refusal as kpt reports a runtime
				// failure (the function's exit code 125, render exit 1).
				if rcode == 0 || !strings.Contains(rerrs, "sandbox unavailable") || gcode != 3 || gen != "" {
					t.Fatalf("doctor says unavailable but render exit %d (%s), generate exit %d (%s)", rcode, rerrs, gcode, gerrs)
				}
				// kpt records the failed render in the Kptfiles' status;
				// the resources stay as they were.
				if got := tree(t, pkg, "Kptfile"); got != tree(t, before, "Kptfile") {
					t.Fatalf("a refused render changed the package's resources:\n%s", got)
				}
				if !strings.Contains(rerrs, "kptr doctor") {
					t.Errorf("the refusal does not point at kptr doctor: %s", rerrs)
				}
				return
			}
			if rcode != 0 || gcode != 0 {
				t.Fatalf("doctor says %s tier usable but render exit %d: %s\ngenerate exit %d: %s", tc.tier, rcode, rerrs, gcode, gerrs)
			}
			if got := tree(t, pkg); got != want {
				t.Errorf("render differs from the namespace tier's unconfined render:\n%s\nwant\n%s", got, want)
			}
			if gen != wantGen {
				t.Errorf("generate differs from the namespace tier's unconfined output:\n%s\nwant\n%s", gen, wantGen)
			}
			if tc.tier == "landlock" && tc.sandbox == "auto" && !strings.Contains(rerrs, "landlock tier") {
				t.Errorf("auto's fallback to the landlock tier not said on stderr: %q", rerrs)
			}
		})
	}
}

// tree is every file below dir with its content, sorted by path, except
// files named skip.
func tree(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || slices.Contains(skip, d.Name()) {
			return err
		}
		c, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		b.WriteString("--- " + rel + "\n" + string(c))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func chmodTree(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("chmod", "-R", "a+rX", dir).CombinedOutput(); err != nil {
		t.Fatalf("chmod: %v %s", err, out)
	}
}
