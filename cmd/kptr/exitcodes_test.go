package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// exitCase is one command line of one error class, with its exit code as
// kptr and as kpt (-1: the command has no kpt form).
type exitCase struct {
	class     string
	args      []string
	env       map[string]string
	kptr, kpt int
	want      string // a line of kptr's stderr contains it
}

// exitFixtures are the packages and paths the cases use.
type exitFixtures struct {
	ok, failing, registry, noKptfile, badKptfile, file, missing, existing, cacheFile string
	// badYAML holds a file that does not parse, nonKRM a resource without
	// apiVersion, noTag a function whose tag constraint matches none of
	// the tags of tagRepo (a registry serving v0.2.1, v0.2.3, v0.3.0)
	badYAML, nonKRM, noTag, tagRepo string
	badTag                          string // a function whose tag: is no tag at all
	wasmExec                        string // an exec function that is a wasm module
	// signature policies: one that rejects every image, one kptr cannot
	// load, one that names "default" twice (reject, then accept anything)
	rejectPolicy, badPolicy, dupPolicy string
}

func newExitFixtures(t *testing.T) exitFixtures {
	t.Helper()
	base := t.TempDir()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	kf := func(fn string) string {
		return "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - " + fn + "\n"
	}
	f := exitFixtures{
		ok:         filepath.Join(base, "ok"),
		failing:    filepath.Join(base, "failing"),
		registry:   filepath.Join(base, "registry"),
		noKptfile:  filepath.Join(base, "no-kptfile"),
		badKptfile: filepath.Join(base, "bad-kptfile"),
		missing:    filepath.Join(base, "missing"),
		existing:   filepath.Join(base, "existing"),
		cacheFile:  filepath.Join(base, "cache-is-a-file"),
	}
	writeTree(t, f.ok, map[string]string{"Kptfile": kf("exec: cat"), "cm.yaml": cm})
	writeTree(t, f.failing, map[string]string{"Kptfile": kf("exec: false"), "cm.yaml": cm})
	// a closed port: every pull fails at once (a registry error)
	writeTree(t, f.registry, map[string]string{"Kptfile": kf("image: 127.0.0.1:1/fn/set-labels:v1"), "cm.yaml": cm})
	writeTree(t, f.noKptfile, map[string]string{"cm.yaml": cm})
	writeTree(t, f.badKptfile, map[string]string{"Kptfile": kf("exec: cat\n    frobnicate: true"), "cm.yaml": cm})
	writeTree(t, f.existing, map[string]string{"x.yaml": cm})
	f.badYAML, f.nonKRM, f.noTag = filepath.Join(base, "bad-yaml"), filepath.Join(base, "non-krm"), filepath.Join(base, "no-tag")
	writeTree(t, f.badYAML, map[string]string{"Kptfile": kf("exec: cat"), "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n"})
	f.wasmExec = filepath.Join(base, "wasm-exec")
	module := filepath.Join(base, "fn.wasm")
	if err := os.WriteFile(module, exitModule, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, f.wasmExec, map[string]string{"Kptfile": kf("exec: " + module), "cm.yaml": cm})
	writeTree(t, f.nonKRM, map[string]string{"Kptfile": kf("exec: cat"), "n.yaml": "kind: ConfigMap\nmetadata:\n  name: x\n"})
	f.badTag = filepath.Join(base, "bad-tag")
	writeTree(t, f.badTag, map[string]string{"Kptfile": kf("image: set-labels\n    tag: \"not a tag!\""), "cm.yaml": cm})
	f.tagRepo = tagRegistry(t) + "/fn/x"
	writeTree(t, f.noTag, map[string]string{"Kptfile": kf("image: " + f.tagRepo + "\n    tag: \"~0.9\""), "cm.yaml": cm})
	f.file = filepath.Join(f.ok, "cm.yaml")
	f.rejectPolicy, f.badPolicy, f.dupPolicy = filepath.Join(base, "reject.json"), filepath.Join(base, "gpg.json"), filepath.Join(base, "dup.json")
	writeTree(t, base, map[string]string{"reject.json": `{"default": [{"type": "reject"}]}`,
		"dup.json": `{"default":[{"type":"reject"}],"default":[{"type":"insecureAcceptAnything"}]}`,
		"gpg.json": `{"default": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/k.gpg"}]}`})
	if err := os.WriteFile(f.cacheFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// exitCases is every command and each error class it can meet: usage (a
// command line that does not parse or make sense), input (the package or a
// path the user named), environment (the cache), function failure, registry.
// The sandbox-unavailable class is TestExitCodesWithoutSandbox's.
func exitCases(f exitFixtures) []exitCase {
	cacheFile := map[string]string{"KPTR_CACHE_DIR": f.cacheFile}
	allowed := map[string]string{"KPTR_ALLOWED_IMAGES": "127.0.0.1:1/**"}
	exec := map[string]string{"KPTR_ALLOW_EXEC": "true"}
	reject := map[string]string{"KPTR_SIGNATURE_POLICY": f.rejectPolicy, "KPTR_ALLOWED_IMAGES": "127.0.0.1:1/**"}
	badPolicy := map[string]string{"KPTR_SIGNATURE_POLICY": f.badPolicy}
	refused := "127.0.0.1:1/fn/set-labels:v1: refused by the signature policy (default): the policy rejects every image here (reject)"
	return []exitCase{
		{"usage", nil, nil, 2, 0, "kptr: name a command"},
		{"usage", []string{"frobnicate"}, nil, 2, 1, `kptr: unknown command "frobnicate"`},
		{"usage", []string{"fn"}, nil, 2, 0, "kptr fn: name a command"},
		{"help", []string{"fn", "--help"}, nil, 0, 0, ""},
		{"help", []string{"cache", "--help"}, nil, 0, 1, ""},
		{"help", []string{"doctor", "--help"}, nil, 0, 1, ""},
		{"usage", []string{"fn", "rendr"}, nil, 2, 1, `kptr fn: unknown command "rendr"; did you mean "render"?`},

		{"ok", []string{"fn", "render", f.ok, "--allow-exec", "-o", "unwrap"}, nil, 0, 0, ""},
		{"usage", []string{"fn", "render", "--bogus"}, nil, 2, 1, "kptr fn render: unknown flag: --bogus"},
		{"usage", []string{"fn", "render", "-z"}, nil, 2, 1, "kptr fn render: unknown shorthand flag: 'z' in -z"},
		{"usage", []string{"fn", "render", "--cahce-dir", "x"}, nil, 2, 1, "kptr fn render: unknown flag: --cahce-dir; did you mean --cache-dir? (see kptr fn render --help)"},
		{"usage", []string{"fn", "render", "a", "b"}, nil, 2, 1, "kptr fn render: expected at most one package path, got 2"},
		{"usage", []string{"fn", "render", f.ok, "--fn-timeout", "0s"}, nil, 2, 1, "--fn-timeout: want a positive duration"},
		{"input", []string{"fn", "render", f.missing}, nil, 2, 1, "Error: package " + f.missing + ": no such directory (fn render takes a package directory)"},
		{"input", []string{"fn", "render", f.file}, nil, 2, 1, "Error: " + f.file + " is a file: fn render takes a package directory"},
		{"input", []string{"fn", "render", f.noKptfile}, nil, 2, 1, "Error: No Kptfile found at"},
		{"input", []string{"fn", "render", f.badKptfile, "--allow-exec"}, nil, 2, 1, "can't be read"},
		{"usage", []string{"fn", "render", f.ok, "-o", "unwrap"}, nil, 2, 1, "must run with `--allow-exec` option"},
		{"input", []string{"fn", "render", f.badTag, "-o", "unwrap"}, nil, 2, 1, `tag "not a tag!" is neither a semver version`},
		{"input", []string{"fn", "render", f.ok, "--allow-exec", "-o", f.existing}, nil, 2, 1, "already exists, please delete the directory and retry"},
		{"input", []string{"fn", "render", f.badYAML, "--allow-exec"}, nil, 2, 1, "Error: bad.yaml: MalformedYAMLError"},
		{"input", []string{"fn", "render", f.nonKRM, "--allow-exec", "-o", "unwrap"}, nil, 2, 1, "must contain only KRM resources: n.yaml: resource must have `apiVersion`"},
		{"input", []string{"fn", "render", f.noTag, "-o", "unwrap"}, nil, 2, 1, `no tag matches constraint "~0.9" (the repository has 3 tags; nearest: v0.2.1, v0.2.3, v0.3.0)`},
		{"function", []string{"fn", "render", f.failing, "--allow-exec", "-o", "unwrap"}, nil, 1, 1, "Exit code: 1"},
		{"function", []string{"fn", "render", f.wasmExec, "--allow-exec", "-o", "unwrap"}, nil, 1, 1, "exec format error (the file is a wasm module: run it with --allow-alpha-wasm)"},
		{"registry", []string{"fn", "render", f.registry, "-o", "unwrap"}, nil, 3, 1, "connection refused"},
		{"signature", []string{"fn", "render", f.registry, "-o", "unwrap"}, reject, 4, 1, refused},
		{"usage", []string{"fn", "render", f.registry, "-o", "unwrap"}, badPolicy, 2, 1, "KPTR_SIGNATURE_POLICY (--signature-policy): signature policy " + f.badPolicy + ": default[0]: requirement type signedBy"},
		{"usage", []string{"fn", "render", f.registry, "-o", "unwrap"}, map[string]string{"KPTR_SIGNATURE_POLICY": f.dupPolicy}, 2, 1, "KPTR_SIGNATURE_POLICY (--signature-policy): signature policy " + f.dupPolicy + `: duplicate key "default" in the policy's top level`},
		{"usage", []string{"fn", "render", f.registry, "-o", "unwrap"}, map[string]string{"KPTR_SIGNATURE_POLICY": " \t "}, 2, 1, "KPTR_SIGNATURE_POLICY (--signature-policy): blank; name a containers-policy.json file"},
		{"usage", []string{"fn", "render", f.registry, "-o", "unwrap", "--signature-policy", " "}, nil, 2, 1, "--signature-policy: empty"},
		{"environment", []string{"fn", "render", f.registry, "-o", "unwrap"}, cacheFile, 3, 1, f.cacheFile},
		{"input", []string{"render", f.missing}, nil, 2, -1, "package " + f.missing + ": no such directory"},
		{"function", []string{"render", f.failing, "--allow-exec", "-o", "unwrap"}, nil, 1, -1, "Exit code: 1"},

		{"ok", []string{"fn", "eval", f.ok, "--exec", "cat", "-o", "unwrap"}, nil, 0, 0, ""},
		{"usage", []string{"fn", "eval", f.ok}, nil, 2, 1, "kptr fn eval: must specify --image or --exec"},
		{"usage", []string{"fn", "eval", f.ok, "--exec", "cat", "-i", "x"}, nil, 2, 1, "kptr fn eval: must specify exactly one of --image and --exec"},
		{"usage", []string{"fn", "eval", f.ok, "--exec", "cat", "--", "a=b", "novalue"}, nil, 2, 1, "args must have keys and values separated by ="},
		{"input", []string{"fn", "eval", f.missing, "--exec", "cat"}, nil, 2, 1, "package " + f.missing + ": no such directory"},
		{"input", []string{"fn", "eval", f.file, "--exec", "cat"}, nil, 2, 1, "is a file: fn eval takes a package directory"},
		{"input", []string{"fn", "eval", f.ok, "--exec", "cat", "-o", f.existing}, nil, 2, 1, "already exists"},
		{"input", []string{"fn", "eval", f.badYAML, "--exec", "cat", "-o", "unwrap"}, nil, 2, 1, "MalformedYAMLError"},
		{"input", []string{"fn", "eval", f.nonKRM, "--exec", "cat", "-o", "unwrap"}, nil, 2, 1, "must contain only KRM resources"},
		{"input", []string{"fn", "eval", f.ok, "-i", f.tagRepo, "--tag", "~0.9", "-o", "unwrap"}, nil, 2, 1, "nearest: v0.2.1, v0.2.3, v0.3.0"},
		{"function", []string{"fn", "eval", f.ok, "--exec", "false", "-o", "unwrap"}, nil, 1, 1, "Exit code: 1"},
		{"registry", []string{"fn", "eval", f.ok, "-i", "127.0.0.1:1/fn/set-labels:v1", "-o", "unwrap"}, nil, 3, 1, "connection refused"},
		{"registry", []string{"fn", "eval", f.ok, "-i", f.tagRepo + ":v9.9.9", "-o", "unwrap"}, nil, 3, 1, "MANIFEST_UNKNOWN: Unknown manifest: the registry has no such image, tag or digest"},
		{"signature", []string{"fn", "eval", f.ok, "-i", "127.0.0.1:1/fn/set-labels:v1", "-o", "unwrap"}, reject, 4, 1, refused},
		{"environment", []string{"fn", "eval", f.ok, "-i", "127.0.0.1:1/fn/set-labels:v1", "-o", "unwrap"}, cacheFile, 3, 1, f.cacheFile},

		{"ok", []string{"fn", "source", f.ok}, nil, 0, 0, ""},
		{"usage", []string{"fn", "source", "a", "b"}, nil, 2, 1, "kptr fn source: expected at most one directory"},
		{"usage", []string{"fn", "source", f.ok, "-o", "json"}, nil, 2, 1, "--output must be stdout or unwrap"},
		{"input", []string{"fn", "source", f.missing}, nil, 2, 1, "package " + f.missing + ": no such directory (fn source takes a package directory)"},
		{"usage", []string{"fn", "sink", "a", "b"}, nil, 2, 1, "kptr fn sink: expected at most one directory"},
		{"input", []string{"fn", "sink", f.existing}, nil, 2, 1, "already exists"},

		{"usage", []string{"generate", "--bogus"}, nil, 2, 1, "kptr generate: unknown flag: --bogus"},
		{"usage", []string{"generate", f.ok}, map[string]string{"KPTR_SANDBOX": "sometimes"}, 2, -1, "KPTR_SANDBOX (--sandbox): want auto, namespace, landlock, wasm or none"},
		{"input", []string{"generate", f.noKptfile}, nil, 2, -1, "kptr generate: no Kptfile in the application path"},
		{"input", []string{"generate", f.badYAML}, exec, 2, -1, "bad.yaml: MalformedYAMLError"},
		{"input", []string{"generate", f.noTag}, map[string]string{"KPTR_ALLOWED_IMAGES": f.tagRepo}, 2, -1, "nearest: v0.2.1, v0.2.3, v0.3.0"},
		{"input", []string{"fn", "source", f.badYAML}, nil, 2, 1, "MalformedYAMLError"},
		{"function", []string{"generate", f.failing}, exec, 1, -1, "kptr generate: render .: false: function failed"},
		{"registry", []string{"generate", f.registry}, allowed, 3, -1, "connection refused"},
		{"signature", []string{"generate", f.registry}, reject, 4, -1, refused},

		{"usage", []string{"prewarm", "--jobs", "0"}, nil, 2, 1, "kptr prewarm: --jobs must be at least 1"},
		{"input", []string{"prewarm", f.missing}, nil, 2, -1, "kptr prewarm: package " + f.missing + ": no such file or directory"},
		{"registry", []string{"prewarm", f.registry}, nil, 3, -1, "connection refused"},
		{"signature", []string{"prewarm", f.registry}, reject, 4, -1, refused},
		{"environment", []string{"prewarm", f.registry}, cacheFile, 3, -1, f.cacheFile},

		{"usage", []string{"cache"}, nil, 2, 1, "kptr cache: name a command"},
		{"usage", []string{"cache", "lss"}, nil, 2, 1, `kptr cache: unknown command "lss"; did you mean "ls"?`},
		{"usage", []string{"cache", "pull"}, nil, 2, 1, "kptr cache pull: name at least one image"},
		{"input", []string{"cache", "pull", "Bad Ref"}, nil, 2, -1, "Bad Ref"},
		{"registry", []string{"cache", "pull", "127.0.0.1:1/fn/set-labels:v1"}, nil, 3, -1, "connection refused"},
		{"signature", []string{"cache", "pull", "127.0.0.1:1/fn/set-labels:v1"}, reject, 4, -1, "kptr cache pull: " + refused},
		{"usage", []string{"cache", "pull", "127.0.0.1:1/fn/set-labels:v1"}, badPolicy, 2, -1, "requirement type signedBy"},
		{"environment", []string{"cache", "pull", "127.0.0.1:1/fn/set-labels:v1"}, cacheFile, 3, -1, f.cacheFile},
		{"ok", []string{"cache", "ls"}, nil, 0, 1, ""},
		{"usage", []string{"cache", "tag", "only-one"}, nil, 2, 1, "kptr cache tag: expected SRC and DST, got 1 argument(s)"},
		{"environment", []string{"cache", "ls"}, cacheFile, 3, -1, f.cacheFile},
		{"usage", []string{"cache", "prune"}, nil, 2, 1, "kptr cache prune: say what to remove"},
		{"usage", []string{"cache", "prune", "--max-size", "lots"}, nil, 2, 1, "want a number of bytes with an optional unit"},
		{"environment", []string{"cache", "prune", "--all"}, cacheFile, 3, -1, f.cacheFile},
		{"usage", []string{"cache", "verify", "extra"}, nil, 2, 1, "kptr cache verify: takes no arguments"},
		{"environment", []string{"cache", "verify"}, cacheFile, 3, -1, f.cacheFile},
		{"usage", []string{"cache", "import"}, nil, 2, 1, "kptr cache import: name at least one source"},
		{"input", []string{"cache", "import", f.missing}, nil, 2, -1, "kptr cache import: source " + f.missing + ": no such file or directory"},
		{"input", []string{"cache", "import", f.file}, nil, 2, -1, "not a complete tarball"},
		{"input", []string{"cache", "import", f.existing}, nil, 2, -1, "neither an OCI image layout nor a docker archive"},
		{"usage", []string{"cache", "export", "x"}, nil, 2, 1, "kptr cache export: need -o DEST and at least one image"},
		{"environment", []string{"cache", "export", "-o", f.missing, "x"}, cacheFile, 3, -1, f.cacheFile},

		// init's own failures, all before CMD starts (CMD's exit status is
		// init's: runtime's TestProcessInit)
		{"help", []string{"init", "--help"}, nil, 0, -1, ""},
		{"usage", []string{"init"}, nil, 2, -1, "kptr init: name the command to run, as in kptr init -- CMD [ARGS...]"},
		{"usage", []string{"init", "--"}, nil, 2, -1, "kptr init: name the command to run"},
		{"usage", []string{"init", "--bogus", "--", "true"}, nil, 2, -1, "kptr init: unknown flag: --bogus"},
		{"input", []string{"init", "--", f.missing}, nil, 2, -1, "kptr init: exec: \"" + f.missing + "\": stat " + f.missing + ": no such file or directory"},
		{"input", []string{"init", "--", f.file}, nil, 2, -1, "permission denied"},
		{"input", []string{"init", "--", "no-such-command-anywhere"}, nil, 2, -1, "executable file not found in $PATH"},

		{"usage", []string{"doctor", "extra"}, nil, 2, 1, `kptr doctor: takes no arguments, got "extra"`},
		{"ok", []string{"version"}, nil, 0, 0, ""},
		{"usage", []string{"version", "extra"}, nil, 2, 1, "kptr version: takes no arguments"},
		{"ok", []string{"completion", "bash"}, nil, 0, 0, ""},
		{"usage", []string{"completion", "tcsh"}, nil, 2, 0, `kptr completion: unknown command "tcsh"`},

		// kpt's other command groups: refused, naming the real kpt
		{"unsupported", []string{"pkg", "get", "https://github.com/x/y"}, nil, 2, 1, `kptr: unknown command "pkg"`},
		{"unsupported", []string{"live", "apply"}, nil, 2, 1, `kptr: unknown command "live"`},
	}
}

// tagRegistry serves one image under three semver tags on a loopback
// registry and returns its host.
func tagRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"v0.2.1", "v0.2.3", "v0.3.0"} {
		ref, err := name.NewTag(host + "/fn/x:" + tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// Every command and error class exits with the README's code as kptr and
// with kpt's (1 for every failure) as kpt, the kptr error on one line with
// one prefix.
func TestExitCodes(t *testing.T) {
	f := newExitFixtures(t)
	for _, c := range exitCases(f) {
		t.Run(c.class+" "+strings.Join(c.args, " "), func(t *testing.T) {
			t.Setenv("KPTR_CACHE_DIR", t.TempDir())
			t.Setenv("KPTR_PROGRESS", "none")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, _, errs := runIn(t, append([]string{"kptr"}, c.args...)...)
			if code != c.kptr || !strings.Contains(errs, c.want) {
				t.Errorf("kptr: exit %d, want %d; stderr %q, want %q", code, c.kptr, errs, c.want)
			}
			if l := notInWords(errs); l != "" {
				t.Errorf("kptr: a line not in words: %q", l)
			}
			for _, line := range strings.Split(errs, "\n") {
				if p, rest, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(p, "kptr") && strings.HasPrefix(rest, strings.TrimPrefix(p, "kptr ")+":") {
					t.Errorf("prefix repeated: %q", line)
				}
			}
			if c.kpt < 0 {
				return
			}
			code, _, errs = runIn(t, append([]string{"/usr/local/bin/kpt"}, c.args...)...)
			if code != c.kpt {
				t.Errorf("kpt: exit %d, want %d; stderr %q", code, c.kpt, errs)
			}
		})
	}
}

// Where the sandbox cannot work (no user namespaces here), a render or eval
// that reaches a function image and doctor exit 3 as kptr (README: an
// environment error; kpt's transcript still shows the function's exit code
// 125) and 1 as kpt, whose docker-less failure is the function's 125 and an
// exit 1. The test runs itself in a user namespace of its own where
// max_user_namespaces is 0.
func TestExitCodesWithoutSandbox(t *testing.T) {
	if os.Getenv("KPTR_NOSANDBOX_CHILD") == "1" {
		// the namespace tier alone: auto would fall back to the landlock tier
		t.Setenv("KPTR_SANDBOX", "namespace")
		f := newExitFixtures(t)
		for _, c := range []exitCase{
			{"sandbox", []string{"fn", "render", f.registry, "-o", "unwrap"}, nil, 3, 1, "run 'kptr doctor'"},
			{"sandbox", []string{"fn", "eval", f.ok, "-i", "127.0.0.1:1/fn/x:v1", "-o", "unwrap"}, nil, 3, 1, "run 'kptr doctor'"},
			{"sandbox", []string{"render", f.registry, "-o", "unwrap"}, nil, 3, -1, "Exit code: 125"},
			{"sandbox", []string{"generate", f.registry}, map[string]string{"KPTR_ALLOWED_IMAGES": "127.0.0.1:1/**"}, 3, -1, "kptr doctor"},
			{"sandbox", []string{"doctor"}, nil, 3, -1, ""},
			// exec functions need no sandbox
			{"ok", []string{"fn", "render", f.ok, "--allow-exec", "-o", "unwrap"}, nil, 0, 0, ""},
		} {
			t.Setenv("KPTR_CACHE_DIR", t.TempDir())
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, _, errs := runIn(t, append([]string{"kptr"}, c.args...)...)
			if code != c.kptr || !strings.Contains(errs, c.want) {
				t.Errorf("kptr %v: exit %d, want %d; stderr %q, want %q", c.args, code, c.kptr, errs, c.want)
			}
			if c.kpt >= 0 {
				if code, _, errs := runIn(t, append([]string{"kpt"}, c.args...)...); code != c.kpt || (c.kpt != 0 && !strings.Contains(errs, "Exit code: 125")) {
					t.Errorf("kpt %v: exit %d, want %d; stderr %q", c.args, code, c.kpt, errs)
				}
			}
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--user", "--map-root-user", "/bin/sh", "-c",
		`echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" -test.run '^TestExitCodesWithoutSandbox$' -test.v`, self)
	cmd.Env = append(os.Environ(), "KPTR_NOSANDBOX_CHILD=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "--- PASS: TestExitCodesWithoutSandbox") {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
}

// The sidecar's command line (kptr init -- CMD) is run by startup before the
// command tree exists; its failures read and exit as through the tree.
func TestInitFastPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, args := range [][]string{{"--", missing}, {"--", "no-such-command-anywhere"}} {
		argv := append([]string{"kptr", "init"}, args...)
		var fast bytes.Buffer
		code, ok := initFast(argv, &fast)
		if !ok {
			t.Fatalf("%v: not taken by the fast path", argv)
		}
		tree, _, errs := runIn(t, argv...)
		if code != tree || fast.String() != errs {
			t.Errorf("%v: fast path exit %d %q, command tree exit %d %q", argv, code, fast.String(), tree, errs)
		}
	}
	for _, argv := range [][]string{{"kptr", "init"}, {"kptr", "init", "--help"}, {"kptr", "init", "true"}, {"kptr", "init", "--"}, {"kpt", "init", "--", "true"}, {"kptr", "version"}} {
		if _, ok := initFast(argv, io.Discard); ok {
			t.Errorf("%v: taken by the fast path", argv)
		}
	}
}

// notInWords returns the first line of a kptr error output that shows a Go
// value (a map, a struct, a pointer, a bad format verb) or a bare system
// error (lstat/open/stat of a path with nothing around it), or "".
func notInWords(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "Error:"))
		if cmd, rest, ok := strings.Cut(t, ": "); ok && strings.HasPrefix(cmd, "kptr") {
			t = rest // kptr's own prefix: "kptr prewarm: stat x: ..."
		}
		switch {
		case strings.Contains(l, "map[") || strings.Contains(l, "&{") || strings.Contains(l, "%!") || goPointer.MatchString(l):
			return l
		case bareSyscall.MatchString(t):
			return l
		}
	}
	return ""
}

var (
	goPointer   = regexp.MustCompile(`\b0xc[0-9a-f]{9,}\b`)
	bareSyscall = regexp.MustCompile(`^(lstat|stat|open|openat|read|readdirent|mkdir) \S+: [a-z ]+$`)
)
