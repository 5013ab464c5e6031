package pipeline

import (
	"bytes"
	"testing"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// results.yaml is written from a node tree; it must be byte for byte what
// kyaml's reflecting MarshalWithOptions writes (kptfile/v1's encode_test
// holds the results themselves to it over generated shapes).
func TestMarshalResultsMatchesReflection(t *testing.T) {
	ref := &yaml.ResourceIdentifier{TypeMeta: yaml.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, NameMeta: yaml.NameMeta{Name: "web", Namespace: "yes"}}
	results := []*kptv1.Result{
		{Message: `set field value to "nginx:1.25"`, Severity: kptv1.Info, ResourceRef: ref, Field: &kptv1.Field{Path: "spec.replicas", CurrentValue: 1, ProposedValue: "3"}},
		{Message: "multi\nline\n", Severity: kptv1.Error, File: &kptv1.File{Path: "a: b.yaml", Index: 2}, Tags: map[string]string{"a10": "x", "a9": "~", "b": "on"}},
		{},
		{ResourceRef: &yaml.ResourceIdentifier{}, Field: &kptv1.Field{}, File: &kptv1.File{}},
	}
	cases := []*ResultList{newResultList(), newResultList(), newResultList(), newResultList(), newResultList()}
	cases[1].Items = []FnResult{{Image: "apply-setters:v0.2", ExitCode: 0, Results: results}}
	cases[2].ExitCode = 1
	cases[2].Items = []FnResult{{ExecPath: "./fn.sh", Stderr: "boom\n  at line 2", ExitCode: 1}, {Image: "x", Results: []*kptv1.Result{}}}
	cases[3].Items = []FnResult{{Image: "x", Results: []*kptv1.Result{nil}}}                        // falls back
	cases[4].Items = []FnResult{{Image: "x", Results: []*kptv1.Result{{Message: "bad \xff utf8"}}}} // falls back
	for i, rl := range cases {
		want, werr := marshalResultsReflect(rl)
		got, gerr := marshalResults(rl)
		if werr != nil || gerr != nil || !bytes.Equal(got, want) {
			t.Errorf("case %d: got %v\n%s\nwant %v\n%s", i, gerr, got, werr, want)
		}
		if _, fast := marshalResultsFast(rl); fast != (i == 1 || i == 2) {
			t.Errorf("case %d: fast path %v", i, fast)
		}
	}
}
