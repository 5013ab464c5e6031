package v1

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeIsStrict(t *testing.T) {
	cases := []struct{ in, want string }{
		{"apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline:\n  mutators:\n    - image: x\n      targetResources: []\n",
			"yaml: unmarshal errors:\n  line 8: field targetResources not found in type v1.Function"},
		{"apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\n  creationTimestamp: null\n",
			"line 5: field creationTimestamp not found in type yaml.ObjectMeta"},
		{"apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline:\n  mutators:\n    - image: x\n      configMap:\n        k: [a]\n",
			"line 9: cannot unmarshal !!seq into string"},
		{"apiVersion: kpt.dev/v1alpha2\nkind: Kptfile\nmetadata:\n  name: a\n", `old resource version "v1alpha2" found in Kptfile`},
		{"apiVersion: kpt.dev/v2\nkind: Kptfile\nmetadata:\n  name: a\n", `unknown resource type "kpt.dev/v2, Kind=Kptfile" found in Kptfile`},
		{"apiVersion: kpt.dev/v1\nkind Kptfile\n", "yaml: line 2: could not find expected ':'"},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	kf, err := Decode([]byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\nupstream:\n  type: git\n  git:\n    repo: r\ninfo:\n  description: d\npipeline:\n  mutators:\n    - image: x\n      tag: ~0.2\n      selectors:\n        - labels:\n            a: b\n      exclude:\n        - kind: K\n"))
	if err != nil || kf.Pipeline.Mutators[0].Tag != "~0.2" || kf.Pipeline.Mutators[0].Exclusions[0].Kind != "K" {
		t.Fatalf("valid Kptfile: %v %+v", err, kf)
	}
}

func TestValidateConfigPath(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "two.yaml"), []byte("apiVersion: v1\nkind: A\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: B\nmetadata:\n  name: b\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "noname.yaml"), []byte("apiVersion: v1\nkind: A\n"), 0o644)
	cases := []struct {
		fn     Function
		reason string
	}{
		{Function{Image: "x", ConfigPath: "/abs.yaml"}, "path must be relative"},
		{Function{Image: "x", ConfigPath: "a/../../b.yaml"}, "path must not be outside the package"},
		{Function{Image: "x", ConfigPath: "two.yaml"}, `functionConfig "two.yaml" must not contain more than one config, got 2`},
		{Function{Image: "x", ConfigPath: "noname.yaml"}, "resource must have `metadata.name`"},
		{Function{Image: "x", ConfigPath: "missing.yaml"}, `failed to open functionConfig from path "missing.yaml"`},
		{Function{Image: "x", ConfigPath: "two.yaml", ConfigMap: map[string]string{"a": "b"}}, "must not specify both `configMap` and `configPath`"},
		{Function{}, "must specify a functon (`image` or `exec`) to execute"},
		{Function{Image: "Not_A/valid:image:name"}, `function name "Not_A/valid:image:name" is invalid`},
	}
	for _, c := range cases {
		kf := &KptFile{Pipeline: &Pipeline{Validators: []Function{c.fn}}}
		err := kf.Validate(os.DirFS(dir), ".")
		var ve *ValidateError
		if !errors.As(err, &ve) || !strings.Contains(ve.Reason, c.reason) || !strings.HasPrefix(ve.Field, "pipeline.validators[0]") {
			t.Errorf("%+v: got %v, want reason %q", c.fn, err, c.reason)
		}
	}
}

func TestStatusFromAnotherVersionIsAccepted(t *testing.T) {
	kf, err := Decode([]byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\nstatus:\n  conditions:\n    - type: Rendered\n      status: \"True\"\n  renderStatus:\n    mutationSteps:\n      - image: x\n        somethingNew: 1\n        exitCode: 0\n  futureField: {}\n"))
	if err != nil {
		t.Fatalf("a status with unknown fields must decode: %v", err)
	}
	if kf.Status == nil || len(kf.Status.Conditions) != 1 || kf.Status.Conditions[0].Type != "Rendered" {
		t.Fatalf("status lost: %+v", kf.Status)
	}
}

// TestMarshalFieldOrder: kpt marshals the Kptfile from its Go structs, so
// field order is struct order. Function (pkg/api/kptfile/v1 in kpt):
// image, exec, configPath, configMap, name, tag, selectors, exclude;
// PipelineStepResult: name, image, exec, executionError, stderr, exitCode,
// results, errorResults.
func TestMarshalFieldOrder(t *testing.T) {
	kf := &KptFile{
		Pipeline: &Pipeline{Mutators: []Function{{
			Image: "set-labels", ConfigMap: map[string]string{"b": "2", "a": "1"},
			Name: "labels", Tag: "~0.2", Selectors: []Selector{{Kind: "ConfigMap"}}, Exclusions: []Selector{{Name: "x"}},
		}}},
		Status: &Status{RenderStatus: &RenderStatus{MutationSteps: []PipelineStepResult{{
			Name: "labels", Image: "ghcr.io/x/set-labels:v0.2.1", ExecutionError: "boom",
			Stderr: "oops\n", ExitCode: 1,
		}}, ErrorSummary: "labels: boom"}},
	}
	kf.APIVersion, kf.Kind, kf.Name = KptFileAPIVersion, KptFileKind, "app"
	b, err := Marshal(kf, "wide")
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
    - image: set-labels
      configMap:
        a: "1"
        b: "2"
      name: labels
      tag: ~0.2
      selectors:
        - kind: ConfigMap
      exclude:
        - name: x
status:
  renderStatus:
    mutationSteps:
      - name: labels
        image: ghcr.io/x/set-labels:v0.2.1
        executionError: boom
        stderr: |
          oops
        exitCode: 1
    errorSummary: 'labels: boom'
`
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
}
