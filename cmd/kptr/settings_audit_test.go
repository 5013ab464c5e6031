package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runIn runs the kptr (or kpt) binary's main logic with argv and the process
// environment, returning exit code, stdout and stderr.
func runIn(t *testing.T, argv ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(argv, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// A package whose only function names an image on a closed port: any attempt
// to resolve it fails, so a test passing with it proves nothing was resolved.
func unreachablePackage(t *testing.T) (dir string, kptfile []byte) {
	t.Helper()
	dir = t.TempDir()
	kptfile = []byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: 127.0.0.1:1/fn/set-labels:v1\n    configMap:\n      a: b\n")
	writeTree(t, dir, map[string]string{
		"Kptfile": string(kptfile),
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	return dir, kptfile
}

// A bad global setting (flag or KPTR_* variable) is a usage error reported
// once, before any function runs: not a per-function exit-125 failure that
// also writes a failed render status into the user's Kptfile, and not silently
// replaced by the default.
func TestBadGlobalSettingsAreUsageErrorsBeforeAnyFunction(t *testing.T) {
	t.Setenv("KPTR_PROGRESS", "none")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"pull policy flag", []string{"--image-pull-policy", "Sometimes"}, nil, "--image-pull-policy: unknown image pull policy \"Sometimes\""},
		{"pull policy variable", nil, map[string]string{"KPTR_IMAGE_PULL_POLICY": "Sometimes"}, "KPTR_IMAGE_PULL_POLICY (--image-pull-policy)"},
		{"sandbox flag", []string{"--sandbox", "maybe"}, nil, "--sandbox: want auto, namespace, landlock, wasm or none, got \"maybe\""},
		{"sandbox variable", nil, map[string]string{"KPTR_SANDBOX": "off"}, "KPTR_SANDBOX (--sandbox): want auto, namespace, landlock, wasm or none"},
		{"progress", []string{"--progress", "fancy"}, nil, "--progress: want auto, plain or none"},
		{"memo flag", []string{"--memo", "yes"}, nil, "--memo: want on or off, got \"yes\""},
		{"memo variable", nil, map[string]string{"KPTR_MEMO": "maybe"}, "KPTR_MEMO (--memo): want on or off"},
		{"log level", nil, map[string]string{"KPTR_LOG_LEVEL": "loud"}, "KPTR_LOG_LEVEL (--log-level)"},
		{"timeout variable", nil, map[string]string{"KPTR_FN_TIMEOUT": "5 minutes"}, "KPTR_FN_TIMEOUT (--fn-timeout): want a duration"},
		{"offline variable", nil, map[string]string{"KPTR_OFFLINE": "yes"}, "KPTR_OFFLINE (--offline): want true or false"},
		{"zero function timeout", []string{"--fn-timeout", "0"}, nil, "--fn-timeout: want a positive duration, got 0s"},
		{"negative timeout variable", nil, map[string]string{"KPTR_FN_TIMEOUT": "-1m"}, "KPTR_FN_TIMEOUT (--fn-timeout): want a positive duration, got -1m0s"},
		{"insecure registry with a scheme", []string{"--insecure-registry", "http://registry.local:5000"}, nil, "--insecure-registry: want a registry HOST[:PORT]"},
		{"insecure registry variable with credentials", nil, map[string]string{"KPTR_INSECURE_REGISTRIES": "bob:hunter2@registry.local"}, "KPTR_INSECURE_REGISTRIES (--insecure-registry): want a registry HOST[:PORT]"},
		{"output cap variable", nil, map[string]string{"KPTR_FN_MAX_OUTPUT": "10MiB"}, "KPTR_FN_MAX_OUTPUT: want a number of bytes"},
		{"mirror with credentials", []string{"--mirror", "127.0.0.1:1=bob:hunter2@127.0.0.1:2"}, nil, "credentials do not belong in a mirror"},
		{"mirror variable with a scheme", nil, map[string]string{"KPTR_MIRRORS": "127.0.0.1:1=https://bob:hunter2@127.0.0.1:2"}, "KPTR_MIRRORS (--mirror): bad mirror"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			dir, kptfile := unreachablePackage(t)
			args := append([]string{"kptr", "fn", "render", dir, "--cache-dir", t.TempDir()}, tc.args...)
			code, out, errs := runIn(t, args...)
			if code != exitUsage || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "kptr fn render: ") || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, out, errs, tc.want)
			}
			if strings.Contains(errs, "hunter2") || strings.Contains(errs, "[RUNNING]") {
				t.Errorf("stderr shows a password or a function run: %q", errs)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "Kptfile")); !bytes.Equal(b, kptfile) {
				t.Errorf("the Kptfile was rewritten:\n%s", b)
			}
			// The same setting under generate: exit 2, nothing on stdout.
			var gout, gerr bytes.Buffer
			g := newGlobals(nil, &gout, &gerr, os.Getenv)
			err := execIn(t.Context(), g, append([]string{"generate", dir}, tc.args...)...)
			if exitCodeOf(err) != exitUsage || gout.Len() != 0 || !strings.Contains(gerr.String(), tc.want) || strings.Contains(gerr.String(), "hunter2") {
				t.Errorf("generate: exit %d, stdout %q, stderr %q", exitCodeOf(err), gout.String(), gerr.String())
			}
		})
	}
}

// Invoked as kpt, the same mistake is kpt's "Error: <msg> " line, exit 1.
func TestBadGlobalSettingAsKpt(t *testing.T) {
	dir, kptfile := unreachablePackage(t)
	code, _, errs := runIn(t, "kpt", "fn", "render", dir, "--image-pull-policy", "Sometimes", "--cache-dir", t.TempDir())
	if code != 1 || errs != "Error: --image-pull-policy: unknown image pull policy \"Sometimes\" (want Always, IfNotPresent or Never) \n" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "Kptfile")); !bytes.Equal(b, kptfile) {
		t.Errorf("the Kptfile was rewritten:\n%s", b)
	}
}

// Flags given explicitly win over a bad variable, which is then never read;
// a variable of a setting the command does not use is not read either.
func TestExplicitFlagOverridesBadVariable(t *testing.T) {
	t.Setenv("KPTR_OFFLINE", "yes")
	if code, _, errs := runIn(t, "kptr", "cache", "pull", "--cache-dir", t.TempDir(), "x"); code != exitUsage || !strings.Contains(errs, "KPTR_OFFLINE") {
		t.Errorf("bad variable: exit %d, stderr %q", code, errs)
	}
	// past the settings: the next check is the command's own
	if code, _, errs := runIn(t, "kptr", "cache", "pull", "--offline=false", "--cache-dir", t.TempDir()); code != exitUsage || !strings.Contains(errs, "name at least one image") {
		t.Errorf("explicit flag: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runIn(t, "kptr", "cache", "ls", "--cache-dir", t.TempDir()); code != 0 {
		t.Errorf("cache ls (never offline or online): exit %d, stderr %q", code, errs)
	}
}

// A mirror with credentials in KPTR_MIRRORS is reported as coming from
// KPTR_MIRRORS by every command that pulls; the cache commands that never pull
// (ls, tag, verify, prune) accept and ignore it, as any setting that does not
// apply to a command. They used to refuse it as "--mirror: bad mirror …",
// naming a flag nobody had given.
func TestMirrorVariableNamedAsItsSource(t *testing.T) {
	t.Setenv("KPTR_MIRRORS", "gcr.io=bob:hunter2@registry.local:5000")
	t.Setenv("KPTR_IMAGE_PULL_POLICY", "Sometimes")
	t.Setenv("KPTR_PROGRESS", "none")
	cacheDir := t.TempDir()
	for _, args := range [][]string{
		{"cache", "pull", "gcr.io/x/fn:v1"},
		{"cache", "fetch", "gcr.io/x/fn:v1"},
		{"prewarm", t.TempDir()},
		{"fn", "eval", "--image", "gcr.io/x/fn:v1", t.TempDir()},
	} {
		t.Setenv("KPTR_IMAGE_PULL_POLICY", "") // the mirror is checked on its own
		code, _, errs := runIn(t, append(append([]string{"kptr"}, args...), "--cache-dir", cacheDir)...)
		if code != exitUsage || !strings.Contains(errs, "KPTR_MIRRORS (--mirror): bad mirror (value with credentials, not shown)") || strings.Contains(errs, "hunter2") {
			t.Errorf("kptr %s: exit %d, stderr %q; want exit 2 naming KPTR_MIRRORS", strings.Join(args, " "), code, errs)
		}
	}
	t.Setenv("KPTR_IMAGE_PULL_POLICY", "Sometimes")
	for _, args := range [][]string{
		{"cache", "ls"},
		{"cache", "verify"},
		{"cache", "prune", "--max-size", "1G"},
	} {
		code, _, errs := runIn(t, append(append([]string{"kptr"}, args...), "--cache-dir", cacheDir)...)
		if code != 0 || errs != "" {
			t.Errorf("kptr %s: exit %d, stderr %q; want the pull settings ignored", strings.Join(args, " "), code, errs)
		}
	}
	code, _, errs := runIn(t, "kptr", "cache", "tag", "gcr.io/x/fn:v1", "gcr.io/x/fn:v2", "--cache-dir", cacheDir)
	if code == 0 || strings.Contains(errs, "mirror") || strings.Contains(errs, "pull policy") || !strings.Contains(errs, "not in the cache") {
		t.Errorf("kptr cache tag of an uncached image: exit %d, stderr %q; want the tag's own error", code, errs)
	}
}

// When the operator's whole-call limit strikes, the one line says so (the
// cause underneath is only "context deadline exceeded" at whatever step ran).
func TestGenerateTimeoutNamesTheLimit(t *testing.T) {
	dir, _ := unreachablePackage(t)
	var out, errb bytes.Buffer
	g := newGlobals(nil, &out, &errb, envMap(map[string]string{
		"KPTR_TIMEOUT":        "1ns",
		"KPTR_ALLOWED_IMAGES": "127.0.0.1:1/**",
		"KPTR_CACHE_DIR":      t.TempDir(),
		"KPTR_PROGRESS":       "none",
	}))
	err := execIn(t.Context(), g, "generate", dir)
	if exitCodeOf(err) == 0 || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 ||
		!strings.HasPrefix(errb.String(), "kptr generate: timed out after 1ns (the operator's limit, KPTR_TIMEOUT") {
		t.Errorf("exit %d, stdout %q, stderr %q", exitCodeOf(err), out.String(), errb.String())
	}
}

// An empty --cache-dir (an unset shell variable) is refused: it used to make
// the current directory the cache, writing blobs/, index.json and locks/ into it.
func TestEmptyCacheDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, _, errs := runIn(t, "kptr", "cache", "ls", "--cache-dir", "")
	if code != exitUsage || !strings.Contains(errs, "--cache-dir: empty") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the current directory got %d entries", len(ents))
	}
}

// A variable is read as checkSettings checks it: surrounding blanks (a YAML
// value "45s " in a pod spec) are neither refused nor silently dropped.
func TestVariablesWithBlanks(t *testing.T) {
	var p policy
	g := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, envMap(map[string]string{"KPTR_FN_TIMEOUT": " 45s ", "KPTR_ALLOW_EXEC": "true ", "KPTR_CACHE_DIR": t.TempDir()}))
	fs := generateFlags(g, &p)
	if err := parseFlags(g, fs, nil); err != nil || g.fnTimeout != 45*time.Second || !p.AllowExec {
		t.Errorf("err %v, fn timeout %v, allow exec %v", err, g.fnTimeout, p.AllowExec)
	}
}
