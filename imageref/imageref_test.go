package imageref

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

func TestNameAppliesKptsRules(t *testing.T) {
	dig := "@sha256:" + strings.Repeat("a", 64)
	cases := []struct{ in, prefix, render, eval string }{
		{"set-labels", "", "ghcr.io/kptdev/krm-functions-catalog/set-labels:latest", "ghcr.io/kptdev/krm-functions-catalog/set-labels"},
		{"set-labels:v0.1", "reg.local/fns", "reg.local/fns/set-labels:v0.1", "reg.local/fns/set-labels:v0.1"},
		{"set-labels:v0.1", "reg.local/fns//", "reg.local/fns/set-labels:v0.1", "reg.local/fns/set-labels:v0.1"},
		{"set-labels", NoPrefix, "set-labels:latest", "set-labels"},
		{"gcr.io/kpt-fn/set-labels:v0.1.5", "", "gcr.io/kpt-fn/set-labels:v0.1.5", "gcr.io/kpt-fn/set-labels:v0.1.5"},
		{"localhost:5000/fn", "", "localhost:5000/fn:latest", "localhost:5000/fn"},
		{"gcr.io/x/fn" + dig, "", "gcr.io/x/fn" + dig, "gcr.io/x/fn" + dig},
	}
	for _, c := range cases {
		if got := Name(c.in, c.prefix, true); got != c.render {
			t.Errorf("render %q: got %q, want %q", c.in, got, c.render)
		}
		if got := Name(c.in, c.prefix, false); got != c.eval {
			t.Errorf("eval %q: got %q, want %q", c.in, got, c.eval)
		}
	}
}

func TestRepositoryStripsTagAndDigestOnly(t *testing.T) {
	dig := "@sha256:" + strings.Repeat("b", 64)
	for in, want := range map[string]string{
		"localhost:5000/fn":          "localhost:5000/fn",
		"localhost:5000/fn:v1":       "localhost:5000/fn",
		"gcr.io/x/fn:v1" + dig:       "gcr.io/x/fn",
		"gcr.io/x/fn" + dig:          "gcr.io/x/fn",
		"busybox":                    "busybox",
		"registry.local:443/a/b/c:9": "registry.local:443/a/b/c",
	} {
		if got := Repository(in); got != want {
			t.Errorf("Repository(%q) = %q, want %q", in, got, want)
		}
		if HasTagOrDigest(in) != (want != in) {
			t.Errorf("HasTagOrDigest(%q) = %v", in, !(want != in))
		}
	}
}

func TestParseKeepsWhatWasWritten(t *testing.T) {
	dig := "sha256:" + strings.Repeat("c", 64)
	cases := []struct{ in, logical, tag, digest, ggcr string }{
		{"busybox", "docker.io/library/busybox", "", "", "index.docker.io/library/busybox:latest"},
		{"docker.io/me/fn:v2", "docker.io/me/fn", "v2", "", "index.docker.io/me/fn:v2"},
		{"gcr.io/x/fn:v1@" + dig, "gcr.io/x/fn", "v1", dig, "gcr.io/x/fn@" + dig},
		{" localhost:5000/fn ", "localhost:5000/fn", "", "", "localhost:5000/fn:latest"},
	}
	for _, c := range cases {
		r, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if r.Logical() != c.logical || r.Tag != c.tag || r.Digest != c.digest || r.Reference.Name() != c.ggcr {
			t.Errorf("Parse(%q) = %q tag %q digest %q ggcr %q, want %q %q %q %q", c.in, r.Logical(), r.Tag, r.Digest, r.Reference.Name(), c.logical, c.tag, c.digest, c.ggcr)
		}
	}
	for _, bad := range []string{"", "  ", "Upper/Case", "gcr.io/x/fn:", "gcr.io/x/fn:bad tag@" + dig, "gcr.io/x/fn@sha256:abc", "a@b@c"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestPhysicalTakesTheLongestMirror(t *testing.T) {
	mirrors := []Mirror{{"gcr.io", "m.local:5000"}, {"gcr.io/kpt-fn", "m.local:5000/fns"}, {"docker.io", "hub.local"}}
	for in, want := range map[string]string{
		"gcr.io/kpt-fn/set-labels:v1": "m.local:5000/fns/set-labels:v1",
		"gcr.io/other/fn:v1":          "m.local:5000/other/fn:v1",
		"gcr.io/kpt-fnx/fn:v1":        "m.local:5000/kpt-fnx/fn:v1", // a '/' boundary, not a string prefix
		"busybox":                     "hub.local/library/busybox:latest",
		"ghcr.io/a/b@sha256:" + strings.Repeat("d", 64): "ghcr.io/a/b@sha256:" + strings.Repeat("d", 64),
	} {
		r, err := name.ParseReference(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := Physical(r, mirrors); got != want {
			t.Errorf("Physical(%q) = %q, want %q", in, got, want)
		}
	}
}

// A mirror with a scheme or credentials, or that is no registry at all, is
// refused when parsed (a usage error, before any pull) and the message never
// repeats the credentials.
func TestParseMirrorRefusesSchemesAndCredentials(t *testing.T) {
	for _, ok := range []string{"gcr.io=127.0.0.1:5000", "ghcr.io/kptdev=registry.corp/kptdev", "gcr.io=localhost:5000/", " gcr.io = 127.0.0.1:5000 "} {
		if _, err := ParseMirror(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"gcr.io=bob:hunter2@127.0.0.1:5000":         "credentials",
		"gcr.io=https://bob:hunter2@127.0.0.1:5000": "without a scheme",
		"gcr.io=http://127.0.0.1:5000":              "without a scheme",
		"bob:hunter2@gcr.io":                        "SRC=DST",
		"gcr.io=127.0.0.1:5000/Bad Path":            "not a registry",
	} {
		_, err := ParseMirror(bad)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", bad, err, want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: error repeats the password: %v", bad, err)
		}
	}
}
