package fnenv

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

func TestImageAllowed(t *testing.T) {
	patterns := []string{"ghcr.io/kptdev/krm-functions-catalog/*", "registry.local:5000/team/**", "example.com/one/fn:v1.*", "example.com/exact"}
	for _, tc := range []struct {
		ref  string
		want bool
	}{
		{"ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0", true},
		{"ghcr.io/kptdev/krm-functions-catalog/set-labels", true},
		{"ghcr.io/kptdev/krm-functions-catalog/set-labels@sha256:" + strings.Repeat("a", 64), true},
		{"ghcr.io/kptdev/krm-functions-catalog/nested/evil:v1", false}, // '*' stops at '/'
		{"ghcr.io/kptdev/krm-functions-catalog-evil/x:v1", false},
		{"evil.io/ghcr.io/kptdev/krm-functions-catalog/x:v1", false},
		{"registry.local:5000/team/a/b/c:v1", true}, // '**' crosses '/'
		{"registry.local:5000/other/a:v1", false},
		{"example.com/one/fn:v1.2", true},
		{"example.com/one/fn:v2.0", false},
		{"example.com/exact:any-tag", true},
		{"example.com/exactly:v1", false},
		{"gcr.io/kpt-fn/set-labels:v0.1.5", false},
	} {
		got, err := ImageAllowed(tc.ref, patterns)
		if err != nil {
			t.Errorf("ImageAllowed(%q): %v", tc.ref, err)
		}
		if got != tc.want {
			t.Errorf("ImageAllowed(%q) = %v, want %v", tc.ref, got, tc.want)
		}
	}
	if _, err := ImageAllowed("UPPER/case:bad", patterns); err == nil {
		t.Error("an unparsable reference must be an error, not a match")
	}
}

// policyEnv is a chain under pol whose cache never opens; opened counts
// how often the chain tried (what a refused image or run never reaches).
func policyEnv(pol *Policy) (e *Env, opened *int) {
	opened = new(int)
	return New(Config{Sandbox: SandboxNone, Policy: pol, OpenCache: func(...cache.Option) (*cache.Cache, error) {
		*opened++
		return nil, errors.New("no cache in this test")
	}}), opened
}

// The allow-list refuses before anything is pulled: a refused image never
// reaches the cache, and the refusal (exit 2) names the image and the list.
// An empty list allows nothing.
func TestAllowListChecksBeforeResolving(t *testing.T) {
	ctx := context.Background()
	e, opened := policyEnv(&Policy{AllowedImages: []string{"ghcr.io/kptdev/krm-functions-catalog/*", "gcr.io/kpt-fn/*"}})
	_, err := e.Resolve(ctx, "docker.io/evil/fn:latest")
	if err == nil {
		t.Fatal("refused image was resolved")
	}
	msg := err.Error()
	for _, want := range []string{`"docker.io/evil/fn:latest"`, "ghcr.io/kptdev/krm-functions-catalog/*", "gcr.io/kpt-fn/*", "not allowed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("rejection %q does not name %q", msg, want)
		}
	}
	if ExitCode(err) != ExitUsage || !errors.Is(e.Cause(), err) {
		t.Errorf("exit code %d, cause %v", ExitCode(err), e.Cause())
	}
	if _, ok := e.ResolveCached(ctx, "docker.io/evil/fn:latest"); ok {
		t.Error("a refused image was found cached")
	}
	e.Fetch(ctx, "docker.io/evil/fn:latest")
	if _, err := e.ResolveConstraint(ctx, "docker.io/evil/fn", "v1.x"); err == nil || !strings.Contains(err.Error(), "repository") {
		t.Errorf("tags of a refused repository listed: %v", err)
	}
	if *opened != 0 {
		t.Fatalf("the cache was opened %d times for refused images", *opened)
	}
	if _, err := e.Resolve(ctx, "ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0"); err == nil || *opened != 1 {
		t.Fatalf("an allowed image did not reach the cache: %v (opened %d)", err, *opened)
	}
	none := &Policy{}
	if err := none.CheckImage("ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.0"); err == nil {
		t.Error("an empty allow-list allowed an image")
	}
	if err := (*Policy)(nil).CheckImage("docker.io/evil/fn:latest"); err != nil {
		t.Errorf("no policy refused: %v", err)
	}
}

func TestPolicyRunner(t *testing.T) {
	ctx := context.Background()
	img := bundle.Bundle{Ref: "ghcr.io/x/y:v1", Rootfs: "/rootfs"}
	exe := bundle.Bundle{Ref: "./my-fn"}
	exe.Config.Entrypoint = []string{"true"}
	closed, opened := policyEnv(&Policy{})
	var pe *PolicyError
	if _, err := (&stage{closed, runExec}).Run(ctx, exe, runtime.Invocation{}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "KPTR_ALLOW_EXEC") {
		t.Errorf("exec under closed policy: %v", err)
	}
	if _, err := closed.Runner().Run(ctx, img, runtime.Invocation{Network: true}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "KPTR_ALLOW_NETWORK") {
		t.Errorf("network under closed policy: %v", err)
	}
	if _, err := closed.Runner().Run(ctx, img, runtime.Invocation{Mounts: []runtime.Mount{{Source: "/", Target: "/host"}}}); err == nil {
		t.Error("host mount allowed")
	}
	if *opened != 0 {
		t.Fatalf("refused runs reached the cache and sandbox: %d", *opened)
	}
	if _, err := closed.Runner().Run(ctx, img, runtime.Invocation{}); errors.As(err, &pe) || *opened != 1 {
		t.Fatalf("plain image run refused by the policy: %v", err)
	}
	open, _ := policyEnv(&Policy{AllowExec: true, AllowNetwork: true})
	if _, err := (&stage{open, runExec}).Run(ctx, exe, runtime.Invocation{Network: true}); err != nil {
		t.Fatalf("allowed exec+network: %v", err)
	}
}

// A sandbox the policy forbids is never even prepared; an allowed one is
// (the chain opens the cache and the sandbox for it).
func TestPolicyRunnerPreparesOnlyWhatRunAllows(t *testing.T) {
	ctx := context.Background()
	img := bundle.Bundle{Ref: "ghcr.io/x/y:v1", Rootfs: "/rootfs"}
	closed, opened := policyEnv(&Policy{})
	p := closed.Runner().(runtime.Preparer)
	p.Prepare(ctx, bundle.Bundle{Ref: "./my-fn"}, runtime.Invocation{})
	p.Prepare(ctx, img, runtime.Invocation{Network: true})
	p.Prepare(ctx, img, runtime.Invocation{Mounts: []runtime.Mount{{Source: "/", Target: "/host"}}})
	if *opened != 0 {
		t.Fatalf("forbidden sandboxes prepared: %d", *opened)
	}
	p.Prepare(ctx, img, runtime.Invocation{})
	if *opened != 1 {
		t.Fatalf("an allowed sandbox was not prepared")
	}
	open, opened := policyEnv(&Policy{AllowNetwork: true})
	open.Runner().(runtime.Preparer).Prepare(ctx, img, runtime.Invocation{Network: true})
	if *opened != 1 {
		t.Fatalf("an allowed sandbox (network) was not prepared")
	}
}
