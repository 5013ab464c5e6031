// Package kpt runs kpt's end-to-end cases (the format of kpt's
// e2e/testdata: a package plus .expected/{config.yaml, diff.patch,
// results.yaml, exec.sh}) against the kptr binary invoked as `kpt` through a
// symlink, like a user's session: copy the case, git init and commit, run
// the command, compare exit code, stderr, stdout, results and `git diff`.
package kpt

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// caseConfig is .expected/config.yaml.
type caseConfig struct {
	TestType              string            `yaml:"testType"`
	ExitCode              int               `yaml:"exitCode"`
	StdErr                string            `yaml:"stdErr"`
	StdOut                string            `yaml:"stdOut"`
	StdErrRegEx           string            `yaml:"stdErrRegEx"`
	StdErrStripLines      []string          `yaml:"stdErrStripLines"`
	ActualStripLines      []string          `yaml:"actualStripLines"`
	AllowExec             bool              `yaml:"allowExec"`
	AllowNetwork          bool              `yaml:"allowNetwork"`
	AllowWasm             bool              `yaml:"allowWasm"`
	ImagePullPolicy       string            `yaml:"imagePullPolicy"`
	DisableOutputTruncate bool              `yaml:"disableOutputTruncate"`
	RunTimes              int               `yaml:"runCount"`
	Skip                  bool              `yaml:"skip"`
	Image                 string            `yaml:"image"`
	ExecPath              string            `yaml:"execPath"`
	FnConfig              string            `yaml:"fnConfig"`
	Args                  map[string]string `yaml:"args"`
	Network               bool              `yaml:"network"`
	IncludeMetaResources  bool              `yaml:"includeMetaResources"`
	// kptr additions: environment for the command (values may use $REGISTRY,
	// $FIXTURES and $CASE_TMP, a directory of this run), and whether the case
	// needs function images.
	Env         map[string]string `yaml:"env"`
	NeedsImages bool              `yaml:"needsImages"`
	CatalogOnly bool              `yaml:"catalogOnly"`
}

func (c caseConfig) runCount() int {
	if c.RunTimes > 0 {
		return c.RunTimes
	}
	return 2
}

// update rewrites diff.patch and results.yaml from the actual output
// (KPT_E2E_UPDATE_EXPECTED=true); review the change before committing it.
var update = os.Getenv("KPT_E2E_UPDATE_EXPECTED") == "true"

// testCase is one case directory.
type testCase struct {
	name, path, cmd string // cmd: render or eval
	cfg             caseConfig
}

// findCases lists every directory under root with a .expected directory.
func findCases(t *testing.T, root, cmd string) []testCase {
	var cases []testCase
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() || info.Name() != ".expected" {
			return nil
		}
		dir := filepath.Dir(p)
		rel, _ := filepath.Rel(root, dir)
		tc := testCase{name: rel, path: dir, cmd: cmd}
		if b, err := os.ReadFile(filepath.Join(p, "config.yaml")); err == nil {
			if err := yaml.Unmarshal(b, &tc.cfg); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		if tc.cfg.TestType == "eval" {
			tc.cmd = "eval"
		}
		cases = append(cases, tc)
		return filepath.SkipDir
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].name < cases[j].name })
	return cases
}

// runner holds what every case needs: the `kpt` symlink and the environment.
type runner struct {
	binDir string // holds kpt -> kptr
	env    []string
	cwd    string // the directory holding testdata/ (exec paths are relative to it)
}

func (r *runner) run(t *testing.T, tc testCase) {
	if tc.cfg.Skip {
		t.Skip("case marked skip")
	}
	for i := 0; i < tc.cfg.runCount(); i++ {
		r.runOnce(t, tc, i)
	}
}

// runOnce runs the case on a fresh copy.
func (r *runner) runOnce(t *testing.T, tc testCase, i int) {
	tmp := t.TempDir()
	pkg := filepath.Join(tmp, filepath.Base(tc.path))
	copyDir(t, tc.path, pkg)
	git(t, pkg, "init", "-q")
	git(t, pkg, "add", "-A")
	git(t, pkg, "commit", "-q", "--allow-empty", "-m", "first")
	first := strings.TrimSpace(git(t, pkg, "rev-parse", "HEAD"))

	var resultsDir string
	if _, err := os.Stat(filepath.Join(tc.path, ".expected", "results.yaml")); err == nil {
		resultsDir = filepath.Join(tmp, "results")
	}
	var outDir string
	if st, err := os.Stat(filepath.Join(tc.path, "out")); err == nil && st.IsDir() {
		outDir = filepath.Join(pkg, "out")
	}

	// setup.sh and teardown.sh (kpt's format) run in the package copy
	hook := func(name string) {
		p := filepath.Join(pkg, ".expected", name)
		if _, err := os.Stat(p); err != nil {
			return
		}
		c := exec.Command("bash", p)
		c.Dir, c.Env = pkg, r.caseEnv(tc, tmp)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	hook("setup.sh")
	defer hook("teardown.sh")
	{
		var cmd *exec.Cmd
		script := filepath.Join(pkg, ".expected", "exec.sh")
		if _, err := os.Stat(script); err == nil {
			cmd = exec.Command("bash", script)
			cmd.Dir = pkg
		} else {
			cmd = exec.Command(filepath.Join(r.binDir, "kpt"), r.args(tc, pkg, resultsDir, outDir)...)
			cmd.Dir = r.cwd
		}
		cmd.Env = r.caseEnv(tc, tmp)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run %v: %v", cmd.Args, err)
		}
		errOut := normalise(stderr.String(), tmp, tc.cfg.StdErrStripLines)
		if code != tc.cfg.ExitCode {
			t.Fatalf("run %d: exit code %d, want %d\nstderr:\n%s\nstdout:\n%s", i, code, tc.cfg.ExitCode, errOut, stdout.String())
		}
		if i == 0 {
			if !strings.Contains(errOut, tc.cfg.StdErr) {
				t.Fatalf("stderr does not contain the expected text\n--- want (contained)\n%s\n--- got\n%s", tc.cfg.StdErr, errOut)
			}
			if tc.cfg.StdErrRegEx != "" && !regexp.MustCompile(tc.cfg.StdErrRegEx).MatchString(errOut) {
				t.Fatalf("stderr does not match %q:\n%s", tc.cfg.StdErrRegEx, errOut)
			}
			if !strings.Contains(stdout.String(), tc.cfg.StdOut) {
				t.Fatalf("stdout does not contain the expected text\n--- want (contained)\n%s\n--- got\n%s", tc.cfg.StdOut, stdout.String())
			}
			if resultsDir != "" && !update {
				want, _ := os.ReadFile(filepath.Join(tc.path, ".expected", "results.yaml"))
				got, err := os.ReadFile(filepath.Join(resultsDir, "results.yaml"))
				if err != nil {
					t.Fatalf("results: %v", err)
				}
				if strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
					t.Fatalf("results.yaml differs\n--- want\n%s\n--- got\n%s", want, got)
				}
			}
		}
		if update && i == 0 && resultsDir != "" {
			if b, err := os.ReadFile(filepath.Join(resultsDir, "results.yaml")); err == nil {
				_ = os.WriteFile(filepath.Join(tc.path, ".expected", "results.yaml"), b, 0o644)
			}
		}
		git(t, pkg, "add", "-A")
		git(t, pkg, "commit", "-q", "--allow-empty", "-m", "second")
		diff := strings.TrimSpace(git(t, pkg, "diff", first, "HEAD"))
		diff = stripLines(diff, tc.cfg.ActualStripLines)
		wantDiff := ""
		if b, err := os.ReadFile(filepath.Join(tc.path, ".expected", "diff.patch")); err == nil {
			wantDiff = strings.TrimSpace(string(b))
		}
		if update && i == 0 && diff != wantDiff {
			p := filepath.Join(tc.path, ".expected", "diff.patch")
			if diff == "" {
				_ = os.Remove(p)
			} else {
				_ = os.WriteFile(p, []byte(diff+"\n"), 0o644)
			}
			t.Logf("updated %s:\n%s", p, diff)
			return
		}
		if diff != wantDiff {
			t.Fatalf("run %d: diff differs\n--- want\n%s\n--- got\n%s\n--- stderr\n%s", i, wantDiff, diff, errOut)
		}
	}
}

func (r *runner) args(tc testCase, pkg, resultsDir, outDir string) []string {
	c := tc.cfg
	args := []string{"fn", tc.cmd, pkg}
	if resultsDir != "" {
		args = append(args, "--results-dir", resultsDir)
	}
	if outDir != "" {
		args = append(args, "-o", outDir)
	}
	if c.ImagePullPolicy != "" {
		args = append(args, "--image-pull-policy", c.ImagePullPolicy)
	}
	if c.AllowWasm {
		args = append(args, "--allow-alpha-wasm")
	}
	if tc.cmd == "render" {
		if c.AllowExec {
			args = append(args, "--allow-exec")
		}
		if c.AllowNetwork {
			args = append(args, "--allow-network")
		}
		if c.DisableOutputTruncate {
			args = append(args, "--truncate-output=false")
		}
		return args
	}
	if c.Network {
		args = append(args, "--network")
	}
	if c.Image != "" {
		args = append(args, "--image", c.Image)
	} else if c.ExecPath != "" {
		args = append(args, "--exec", filepath.Join(pkg, ".expected", c.ExecPath))
	}
	if c.FnConfig != "" {
		// relative to .expected, in the copy; kpt's own cases also name
		// files beside the case (fnConfig: ../../config.yaml), outside
		// what is copied: those are read where the case is
		p := filepath.Join(pkg, ".expected", c.FnConfig)
		if _, err := os.Stat(p); err != nil {
			p, _ = filepath.Abs(filepath.Join(tc.path, ".expected", c.FnConfig))
		}
		args = append(args, "--fn-config", p)
	}
	if c.IncludeMetaResources {
		args = append(args, "--include-meta-resources")
	}
	if len(c.Args) > 0 {
		args = append(args, "--")
		keys := make([]string, 0, len(c.Args))
		for k := range c.Args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, k+"="+c.Args[k])
		}
	}
	return args
}

func (r *runner) caseEnv(tc testCase, tmp string) []string {
	env := append([]string{}, r.env...)
	env = append(env, "CASE_TMP="+tmp)
	if tc.cfg.NeedsImages {
		env = append(env, imagesEnv...)
	}
	for k, v := range tc.cfg.Env {
		env = append(env, k+"="+os.Expand(v, func(s string) string {
			for _, e := range env {
				if strings.HasPrefix(e, s+"=") {
					return e[len(s)+1:]
				}
			}
			return ""
		}))
	}
	return env
}

// durationRE matches a [PASS]/[FAIL] line's time as Go prints a
// time.Duration: "0s", "397ms", "1.204s", "1m2.345s", "1h0m0.001s".
var durationRE = regexp.MustCompile(`^(\[(?:PASS|FAIL)\] ".*") in (?:[0-9]+h)?(?:[0-9]+m)?[0-9]+(?:\.[0-9]+)?(?:ns|µs|ms|s)$`)

// normalise rewrites "[PASS] "x" in 1.2s" to "in 0s" (kpt's harness,
// sanitizeTimestamps in pkg/test/runner/runner.go, does it for names without
// spaces), strips the temporary directory prefix and drops the configured
// lines.
func normalise(s, tmp string, strip []string) string {
	s = strings.ReplaceAll(s, tmp+string(filepath.Separator), "")
	s = strings.ReplaceAll(s, tmp, "")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = durationRE.ReplaceAllString(l, "$1 in 0s")
	}
	return stripLines(strings.Join(lines, "\n"), strip)
}

func stripLines(s string, strip []string) string {
	if len(strip) == 0 {
		return s
	}
	drop := map[string]bool{}
	for _, l := range strip {
		drop[l] = true
	}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !drop[l] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// copyDir copies a case, making everything writable (the sample is read-only).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		return os.WriteFile(target, b, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
}
