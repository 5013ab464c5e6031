package main

import (
	"strings"
	"testing"
)

// Every kptr process, and so every sandbox start (its container init is a
// fresh start of the kptr binary, see runtime/namespace/tier.go), runs the package
// init of everything kptr links. These packages cost milliseconds there
// (GODEBUG=inittrace=1: regexps compiled at init) and kptr does not need
// them; a new import that brings them back must be a deliberate choice.
func TestStartupImports(t *testing.T) {
	out := goList(t, "-deps", ".")
	for _, banned := range []string{
		"sigs.k8s.io/kustomize/kyaml/fn/framework",  // use pipeline/kptfile/v1.Result
		"k8s.io/kube-openapi/pkg/validation/strfmt", // 2.6 ms at init, through fn/framework
		"k8s.io/kube-openapi/pkg/internal/third_party/govalidator",
	} {
		for _, dep := range strings.Fields(out) {
			if dep == banned {
				t.Errorf("kptr links %s: its package init runs at every kptr start and every sandbox start", banned)
			}
		}
	}
}
