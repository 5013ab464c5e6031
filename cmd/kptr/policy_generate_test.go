package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/imageref"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// operatorPolicy parses generate's flags the way generate does.
func operatorPolicy(t *testing.T, env map[string]string, args ...string) (*policy, *globals) {
	t.Helper()
	var p policy
	g := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, envMap(env))
	fs := generateFlags(g, &p)
	if err := parseFlags(g, fs, args); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if err := p.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return &p, g
}

func TestPolicyDefaultsAreClosed(t *testing.T) {
	p, g := operatorPolicy(t, nil)
	if p.AllowExec || p.AllowNetwork || p.AllowEmpty || p.AnnotationDomain != "" {
		t.Fatalf("default policy must be closed, got %+v", p)
	}
	if strings.Join(p.AllowedImages, ",") != strings.Join(defaultAllowedImages, ",") {
		t.Fatalf("default allow-list = %v", p.AllowedImages)
	}
	if g.fnTimeout != 5*time.Minute {
		t.Fatalf("default fn timeout = %v", g.fnTimeout)
	}
}

func TestPolicyFromOperatorEnvAndFlags(t *testing.T) {
	p, g := operatorPolicy(t, map[string]string{
		"KPTR_ALLOWED_IMAGES":    "registry.local/fns/*, ghcr.io/x/y",
		"KPTR_ALLOW_EXEC":        "true",
		"KPTR_ALLOW_NETWORK":     "1",
		"KPTR_ALLOW_EMPTY":       "true",
		"KPTR_ANNOTATION_DOMAIN": "ops.example.com",
		"KPTR_FN_TIMEOUT":        "40s",
		"KPTR_TIMEOUT":           "55s",
		"KPTR_MAX_OUTPUT_BYTES":  "1000",
	})
	if got := strings.Join(p.AllowedImages, ","); got != "registry.local/fns/*,ghcr.io/x/y" {
		t.Errorf("allowed images = %q", got)
	}
	if !p.AllowExec || !p.AllowNetwork || !p.AllowEmpty || p.AnnotationDomain != "ops.example.com" ||
		p.Timeout != 55*time.Second || p.MaxOutputBytes != 1000 || g.fnTimeout != 40*time.Second {
		t.Errorf("policy from env = %+v, fn timeout %v", p, g.fnTimeout)
	}
	// plugin.yaml flags win over the variables.
	p, _ = operatorPolicy(t, map[string]string{"KPTR_ALLOW_EXEC": "true"}, "--allow-exec=false", "--allowed-images", "a.io/*")
	if p.AllowExec || strings.Join(p.AllowedImages, ",") != "a.io/*" {
		t.Errorf("flags must win: %+v", p)
	}
}

func TestPolicyRejectsBadOperatorSettings(t *testing.T) {
	for _, env := range []map[string]string{
		{"KPTR_ANNOTATION_DOMAIN": "Not A Domain"},
		{"KPTR_MAX_OUTPUT_BYTES": "-1"},
	} {
		var p policy
		g := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, envMap(env))
		fs := generateFlags(g, &p)
		if err := parseFlags(g, fs, nil); err != nil {
			t.Fatal(err)
		}
		if err := p.validate(); err == nil {
			t.Errorf("%v: want a validation error", env)
		}
	}
}

// untrustedEnv is everything an Application's author can put in the
// environment, trying every spelling of every widening setting.
func untrustedEnv() map[string]string {
	env := map[string]string{
		"ARGOCD_APP_PARAMETERS": `[{"name":"allow-exec","string":"true"},{"name":"allowed-images","array":["**"]}]`,
		"PARAM_ARGS":            "--allow-exec --allow-network --allowed-images=** --sandbox=none",
		"PARAM_ARGS_0":          "--allow-exec",
		"PARAM_FLAGS":           "--allow-exec",
	}
	for _, k := range []string{
		"ALLOW_EXEC", "ALLOW_NETWORK", "ALLOW_EMPTY", "ALLOWED_IMAGES", "SANDBOX", "CACHE_DIR", "MIRRORS",
		"INSECURE_REGISTRIES", "IMAGE_PULL_POLICY", "OFFLINE", "TIMEOUT", "MAX_OUTPUT_BYTES", "IMAGE_PREFIX",
	} {
		v := "true"
		switch k {
		case "ALLOWED_IMAGES":
			v = "**"
		case "SANDBOX":
			v = "none"
		case "CACHE_DIR":
			v = "/tmp/evil-cache"
		case "MIRRORS":
			v = "ghcr.io=evil.example.com"
		case "INSECURE_REGISTRIES":
			v = "evil.example.com"
		case "IMAGE_PULL_POLICY":
			v = "Always"
		case "TIMEOUT":
			v = "10h"
		case "MAX_OUTPUT_BYTES":
			v = "99999999999"
		case "IMAGE_PREFIX":
			v = "evil.example.com/"
		}
		for _, prefix := range []string{"PARAM_", "PARAM_KPTR_", "ARGOCD_ENV_", "ARGOCD_ENV_KPTR_"} {
			env[prefix+k] = v
		}
		env["PARAM_"+k+"_0"] = v
	}
	env["PARAM_FN_TIMEOUT"] = "1s" // the one narrowing parameter, legitimately used
	return env
}

func TestAppParametersCannotWidenPolicy(t *testing.T) {
	env := untrustedEnv()
	p, g := operatorPolicy(t, env)
	before := *p
	beforeCacheDir := g.cacheDir
	if err := p.applyAppParameters(g.getenv, &g.fnTimeout); err != nil {
		t.Fatalf("applyAppParameters: %v", err)
	}
	if p.AllowExec || p.AllowNetwork || p.AllowEmpty {
		t.Fatalf("a parameter widened the policy: %+v", p)
	}
	if strings.Join(p.AllowedImages, ",") != strings.Join(defaultAllowedImages, ",") {
		t.Fatalf("a parameter changed the allow-list: %v", p.AllowedImages)
	}
	if p.Timeout != before.Timeout || p.MaxOutputBytes != before.MaxOutputBytes {
		t.Fatalf("a parameter changed limits: %+v", p)
	}
	// Nor any global setting: cache, mirrors, registries, pull policy, sandbox, prefix.
	if g.cacheDir != beforeCacheDir || g.sandbox != "auto" || len(g.mirrors) != 0 || len(g.insecure) != 0 ||
		g.pullPolicy != "IfNotPresent" || g.offline || g.imagePrefix != imageref.DefaultPrefix {
		t.Fatalf("a parameter changed a global setting: %+v", g)
	}
	if g.fnTimeout != time.Second {
		t.Fatalf("fn-timeout parameter (narrowing) not applied: %v", g.fnTimeout)
	}

	// An image outside the allow-list stays refused, whatever the parameters.
	if err := (&fnenv.Policy{AllowedImages: p.AllowedImages}).CheckImage("evil.example.com/fn:v1"); err == nil {
		t.Fatal("image outside the allow-list was resolved")
	}
}

func TestAppParameterFnTimeoutOnlyNarrows(t *testing.T) {
	p, g := operatorPolicy(t, map[string]string{"KPTR_FN_TIMEOUT": "30s", "PARAM_FN_TIMEOUT": "2m"})
	err := p.applyAppParameters(g.getenv, &g.fnTimeout)
	if err == nil || !strings.Contains(err.Error(), "exceeds the operator's limit 30s") {
		t.Fatalf("want refusal of a longer timeout, got %v", err)
	}
	if g.fnTimeout != 30*time.Second {
		t.Fatalf("timeout changed to %v", g.fnTimeout)
	}
}

func TestAppParameterAnnotationDomain(t *testing.T) {
	p, g := operatorPolicy(t, map[string]string{"ARGOCD_ENV_ANNOTATION_DOMAIN": "env.example.com"})
	if err := p.applyAppParameters(g.getenv, &g.fnTimeout); err != nil || p.AnnotationDomain != "env.example.com" {
		t.Fatalf("plugin env: %q %v", p.AnnotationDomain, err)
	}
	p, g = operatorPolicy(t, map[string]string{"ARGOCD_ENV_ANNOTATION_DOMAIN": "env.example.com", "PARAM_ANNOTATION_DOMAIN": "param.example.com"})
	if err := p.applyAppParameters(g.getenv, &g.fnTimeout); err != nil || p.AnnotationDomain != "param.example.com" {
		t.Fatalf("parameter must win: %q %v", p.AnnotationDomain, err)
	}
	p, g = operatorPolicy(t, map[string]string{"PARAM_ANNOTATION_DOMAIN": "bad domain/x"})
	if err := p.applyAppParameters(g.getenv, &g.fnTimeout); err == nil {
		t.Fatal("invalid domain accepted")
	}
}
