package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1234": 1234, "2GiB": 2 << 30, "2G": 2 << 30, "500MB": 500e6, "1.5K": 1536, "0": 0} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "5 parsecs", "-1G"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func runKptr(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"kptr"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCacheCommandsExitCodes(t *testing.T) {
	dir := t.TempDir()
	if code, out, errs := runKptr(t, "cache", "ls", "--cache-dir", dir); code != 0 || !strings.HasPrefix(out, "REFERENCE") {
		t.Fatalf("ls on an empty cache: %d %q %q", code, out, errs)
	}
	if code, out, _ := runKptr(t, "cache", "verify", "--cache-dir", dir); code != 0 || !strings.Contains(out, "0 corrupt") {
		t.Fatalf("verify: %d %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cache", "prune", "--max-size", "lots"}, 2, `--max-size: bad size "lots": want a number of bytes with an optional unit: B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)`},
		{[]string{"cache", "prune", "--max-size", "5 parsecs"}, 2, "bad size unit in \"5 parsecs\": want a number of bytes with an optional unit: B, K/KiB"},
		// no limit: say what is needed rather than "removed 0 B"
		{[]string{"cache", "prune"}, 2, "kptr cache prune: say what to remove: --max-size SIZE (e.g. 2GiB), --max-age DURATION (e.g. 720h) or --all\n"},
		// one prefix per message (it was "kptr cache pull: cache pull: ...")
		{[]string{"cache", "pull"}, 2, "kptr cache pull: name at least one image\n"},
		{[]string{"cache", "import"}, 2, "kptr cache import: name at least one source\n"},
		{[]string{"cache", "export", "x"}, 2, "kptr cache export: need -o DEST and at least one image\n"},
		{[]string{"cache", "pull", "--image-pull-policy", "Sometimes", "x"}, 2, "unknown image pull policy"},
		{[]string{"cache", "pull", "--mirror", "gcr.io", "x"}, 2, "SRC=DST"},
		{[]string{"cache", "pull", "Bad Ref"}, 2, "Bad Ref"},
		{[]string{"cache", "pull", "--offline", "gcr.io/kpt-fn/set-labels:v0.1.5"}, 3, "gcr.io/kpt-fn/set-labels:v0.1.5: not in the cache (offline)"},
		{[]string{"cache", "export", "-o", "-", "x"}, 2, "kptr cache export: -o - needs --tar\n"},
		// a source that does not exist is the user's input error, not the cache's (it was 3)
		{[]string{"cache", "import", "/nonexistent"}, 2, "kptr cache import: source /nonexistent: no such file or directory\n"},
	} {
		code, _, errs := runKptr(t, append(tc.args, "--cache-dir", dir)...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

// kptr cache pull re-resolves a tag it already has, as docker pull does (it
// kept the cached resolution under the default IfNotPresent), so a tag that
// moved is pulled anew; KPTR_IMAGE_PULL_POLICY still governs renders, and an
// explicit --image-pull-policy IfNotPresent keeps what is cached.
func TestCachePullReresolvesTags(t *testing.T) {
	host := tagRegistry(t)
	ref := host + "/fn/x:v0.2.1"
	dir := t.TempDir()
	t.Setenv("KPTR_CACHE_DIR", dir)
	t.Setenv("KPTR_PROGRESS", "none")
	t.Setenv("KPTR_IMAGE_PULL_POLICY", "IfNotPresent")
	pull := func(extra ...string) string {
		t.Helper()
		code, out, errs := runKptr(t, append([]string{"cache", "pull", ref}, extra...)...)
		if code != 0 {
			t.Fatalf("cache pull: exit %d: %s", code, errs)
		}
		return strings.Fields(out)[1]
	}
	first := pull()
	// the tag moves to another image
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	moved, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got := pull("--image-pull-policy", "IfNotPresent"); got != first {
		t.Errorf("explicit IfNotPresent: %s, want the cached %s", got, first)
	}
	if got := pull(); got != moved.String() {
		t.Errorf("cache pull kept %s; want the tag's new image %s (first pull %s)", got, moved, first)
	}
}

// kptr cache ls REPOSITORY (no tag, no digest) lists every cached tag of
// that repository, as docker images REPOSITORY does; a repository with none
// cached is "No such image" and exit 1 (issue 32: it was always "No such
// image").
func TestCacheLsRepository(t *testing.T) {
	host := tagRegistry(t)
	t.Setenv("KPTR_CACHE_DIR", t.TempDir())
	t.Setenv("KPTR_PROGRESS", "none")
	if code, _, errs := runIn(t, "kptr", "cache", "pull", host+"/fn/x:v0.2.1", host+"/fn/x:v0.3.0"); code != 0 {
		t.Fatalf("pull: %d %s", code, errs)
	}
	code, out, errs := runIn(t, "kptr", "cache", "ls", host+"/fn/x")
	if code != 0 || !strings.Contains(out, host+"/fn/x:v0.2.1 ") || !strings.Contains(out, host+"/fn/x:v0.3.0 ") {
		t.Errorf("cache ls REPOSITORY: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runIn(t, "kptr", "cache", "ls", host+"/fn/y")
	if code != 1 || strings.Contains(out, "fn/x") || !strings.Contains(errs, "No such image: "+host+"/fn/y") {
		t.Errorf("cache ls of an uncached repository: exit %d\n%s%s", code, out, errs)
	}
}
