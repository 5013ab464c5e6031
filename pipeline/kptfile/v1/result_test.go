package v1

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Result must stay kyaml's framework.Result in every way kpt users see:
// the transcript line, and the YAML and JSON results files and Kptfile
// status (field names, order, omissions).
func TestResultIsFrameworkResult(t *testing.T) {
	ref := &yaml.ResourceIdentifier{TypeMeta: yaml.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, NameMeta: yaml.NameMeta{Name: "web", Namespace: "prod"}}
	cases := []framework.Result{
		{},
		{Message: "plain"},
		{Message: "m", Severity: framework.Error},
		{Message: "m", Severity: framework.Warning, ResourceRef: ref},
		{Message: "m", ResourceRef: &yaml.ResourceIdentifier{NameMeta: yaml.NameMeta{Name: "only-name"}}},
		{Message: "m", ResourceRef: &yaml.ResourceIdentifier{}},
		{Message: "m", Severity: framework.Info, Field: &framework.Field{Path: "spec.replicas", CurrentValue: 3, ProposedValue: "4"}},
		{Message: "multi\nline", File: &framework.File{Path: "a/b.yaml", Index: 2}, Tags: map[string]string{"z": "1", "a": "2"}},
		{Message: "all", Severity: "custom", ResourceRef: ref, Field: &framework.Field{Path: "f"}, File: &framework.File{Path: "p"}, Tags: map[string]string{"k": "v"}},
	}
	for _, want := range cases {
		wy, err := yaml.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got Result
		if err := yaml.Unmarshal(wy, &got); err != nil {
			t.Fatal(err)
		}
		gy, err := yaml.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(gy) != string(wy) {
			t.Errorf("YAML:\n%s\nwant (framework.Result):\n%s", gy, wy)
		}
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if string(gj) != string(wj) {
			t.Errorf("JSON: %s, want %s", gj, wj)
		}
		if got.String() != want.String() {
			t.Errorf("String: %q, want %q", got.String(), want.String())
		}
	}
}
