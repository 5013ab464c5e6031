package main

import (
	"bytes"
	"strings"
	"testing"
)

// generate's exit code follows the cause, as the README promises: a function
// that fails is 1, the operator's policy refusing an image is 2, a registry,
// cache or sandbox cause is 3 (the render reports the latter as the
// function's exit code 125, as kpt does, which alone would always give 1).
func TestGenerateExitCodeFollowsTheCause(t *testing.T) {
	execPkg := func(cmd string) string {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - exec: " + cmd + "\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		})
		return dir
	}
	unreachable, _ := unreachablePackage(t)
	for _, tc := range []struct {
		name string
		dir  string
		env  map[string]string
		code int
		want string
	}{
		{"registry unreachable", unreachable, map[string]string{"KPTR_ALLOWED_IMAGES": "127.0.0.1:1/**"}, exitEnv, "connection refused"},
		{"offline miss", unreachable, map[string]string{"KPTR_ALLOWED_IMAGES": "127.0.0.1:1/**", "KPTR_OFFLINE": "true"}, exitEnv, "not in the cache (offline)"},
		{"cache directory unusable", unreachable, map[string]string{"KPTR_ALLOWED_IMAGES": "127.0.0.1:1/**", "KPTR_CACHE_DIR": "/proc/kptr-cache"}, exitEnv, "/proc/kptr-cache"},
		{"image outside the allow-list", unreachable, nil, exitUsage, "not allowed by the operator's policy"},
		{"function fails", execPkg("false"), map[string]string{"KPTR_ALLOW_EXEC": "true"}, exitFunction, "exit code 1"},
		{"function binary missing", execPkg("/nonexistent/fn"), map[string]string{"KPTR_ALLOW_EXEC": "true"}, exitFunction, "/nonexistent/fn"},
	} {
		env := map[string]string{"KPTR_CACHE_DIR": t.TempDir(), "KPTR_PROGRESS": "none"}
		for k, v := range tc.env {
			env[k] = v
		}
		var out, errb bytes.Buffer
		err := execIn(t.Context(), newGlobals(nil, &out, &errb, envMap(env)), "generate", tc.dir)
		if code := exitCodeOf(err); code != tc.code || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d (want %d), stdout %q, stderr %q (want %q)", tc.name, code, tc.code, out.String(), errb.String(), tc.want)
		}
	}
}

// A negative KPTR_TIMEOUT was silently "no limit"; it is refused.
func TestGenerateNegativeTimeoutIsRefused(t *testing.T) {
	dir, _ := unreachablePackage(t)
	var out, errb bytes.Buffer
	err := execIn(t.Context(), newGlobals(nil, &out, &errb, envMap(map[string]string{"KPTR_TIMEOUT": "-30s", "KPTR_CACHE_DIR": t.TempDir()})), "generate", dir)
	if exitCodeOf(err) != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "KPTR_TIMEOUT (--timeout) must not be negative") {
		t.Errorf("exit %d, stdout %q, stderr %q", exitCodeOf(err), out.String(), errb.String())
	}
}

// A Kptfile exec function under the default policy is the operator's refusal
// (exit 2, naming KPTR_ALLOW_EXEC), not kpt's advice to pass --allow-exec,
// which the Application's owner cannot do.
func TestGenerateExecRefusalNamesThePolicy(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - exec: cat\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	var out, errb bytes.Buffer
	err := execIn(t.Context(), newGlobals(nil, &out, &errb, envMap(map[string]string{"KPTR_CACHE_DIR": t.TempDir()})), "generate", dir)
	if exitCodeOf(err) != exitUsage || out.Len() != 0 || errb.String() != "kptr generate: render .: cat: exec functions are not allowed by the operator's policy (KPTR_ALLOW_EXEC / --allow-exec)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", exitCodeOf(err), out.String(), errb.String())
	}
}
