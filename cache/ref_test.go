package cache

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPickTag(t *testing.T) {
	tags := []string{"v0.1.0", "v0.2.0", "v0.2.3", "v0.2.10", "v0.3.0", "sha256-abc.sig", "v0.2.99-git-abcdef", "latest", "v0.4.1", "v0.4.2", "v0.4.3", "v0.4.4"}
	for _, tc := range []struct{ constraint, want, err string }{
		{"~0.2", "v0.2.10", ""},
		{"0.4.1 - 0.4.3", "v0.4.3", ""},
		{">=0.3", "v0.4.4", ""},
		{"v0.1.5", "v0.1.5", ""}, // a version is used literally, listed or not
		{"1.2.3", "1.2.3", ""},
		{"latest", "latest", ""},
		{"unstable", "unstable", ""},
		{"~9.0", "", "no tag matches"},
		{"bad tag!", "", "neither"},
	} {
		got, err := PickTag(tags, tc.constraint)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %q, %v; want error %q", tc.constraint, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.constraint, got, err, tc.want)
		}
	}
}

// A constraint no tag matches names the nearest semver tags, at most five
// (the highest when the constraint is above them all, those around it
// otherwise), and is an input error (exit 2), not a registry one.
func TestPickTagNoMatchListsNearest(t *testing.T) {
	tags := []string{"v0.1.0", "v0.2.0", "v0.2.3", "v0.2.10", "v0.3.0", "sha256-abc.sig", "v0.2.99-git-abcdef", "latest", "v0.4.1", "v0.4.2", "v0.4.3", "v0.4.4"}
	for _, tc := range []struct{ constraint, want string }{
		{"~9.0", `no tag matches constraint "~9.0" (the repository has 12 tags; nearest: v0.3.0, v0.4.1, v0.4.2, v0.4.3, v0.4.4)`},
		{"~0.3.5", `nearest: v0.2.3, v0.2.10, v0.3.0, v0.4.1, v0.4.2)`},
		{"<0.1", `nearest: v0.1.0, v0.2.0, v0.2.3, v0.2.10, v0.3.0)`},
	} {
		_, err := PickTag(tags, tc.constraint)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrNoTagMatch) {
			t.Errorf("%q: %v; want %q", tc.constraint, err, tc.want)
		}
	}
	if _, err := PickTag([]string{"latest", "main"}, "~1.0"); err == nil || !strings.Contains(err.Error(), "none of the repository's 2 tags is a semver version") {
		t.Errorf("no semver tags: %v", err)
	}
	if _, err := PickTag(nil, "~1.0"); err == nil || !strings.Contains(err.Error(), "the repository has no tags") {
		t.Errorf("no tags: %v", err)
	}
}

func TestResolveConstraint(t *testing.T) {
	reg := newTestRegistry(t)
	img := image(t, false, HostPlatform().Architecture, layerWith(t, "x"))
	for _, tag := range []string{"v0.2.0", "v0.2.4", "v0.3.0", "sha256-deadbeef", "v0.2.9-git-abc"} {
		push(t, img, reg.Host+"/fn/set-labels:"+tag)
	}
	c := openTest(t, "", WithImagePrefix(reg.Host+"/fn"))
	got, err := c.ResolveConstraint(ctx, "set-labels", "~0.2")
	if err != nil || got != reg.Host+"/fn/set-labels:v0.2.4" {
		t.Fatalf("got %q %v", got, err)
	}
	if got, err := c.ResolveConstraint(ctx, "set-labels", "v0.1.0"); err != nil || got != reg.Host+"/fn/set-labels:v0.1.0" {
		t.Fatalf("literal: %q %v", got, err)
	}
	_, err = c.ResolveConstraint(ctx, "set-labels", "~0.9")
	var ce *Error
	if !errors.As(err, &ce) || ce.ExitCode() != 2 || !strings.Contains(err.Error(), "nearest: v0.2.0, v0.2.4, v0.3.0") {
		t.Fatalf("no match: %v (want an exit-2 error listing the nearest tags)", err)
	}
	// Offline, the recorded tags are the list.
	if _, err := c.Resolve(ctx, reg.Host+"/fn/set-labels:v0.2.0"); err != nil {
		t.Fatal(err)
	}
	off := openTest(t, c.Dir(), WithOffline(true), WithImagePrefix(reg.Host+"/fn"))
	reg.Close()
	if got, err := off.ResolveConstraint(ctx, "set-labels", "~0.2"); err != nil || got != reg.Host+"/fn/set-labels:v0.2.0" {
		t.Fatalf("offline: %q %v", got, err)
	}
}

func TestPlainHTTPOnlyForLoopbackOrListed(t *testing.T) {
	g := &registryTransport{next: http.DefaultTransport, insecure: map[string]bool{"registry.corp:5000": true}, timeout: time.Second}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://10.1.2.3:5000/v2/", false},
		{"http://registry.example:5000/v2/", false},
		{"http://registry.corp:5000/v2/", true},
		{"http://127.0.0.1:1/v2/", true},
		{"http://[::1]:1/v2/", true},
		{"http://localhost:1/v2/", true},
	} {
		req, _ := http.NewRequest("GET", tc.url, nil)
		_, err := g.RoundTrip(req)
		refused := err != nil && strings.Contains(err.Error(), "refusing plain HTTP")
		if refused == tc.ok {
			t.Errorf("%s: refused=%v, want allowed=%v (%v)", tc.url, refused, tc.ok, err)
		}
	}
}
