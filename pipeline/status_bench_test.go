package pipeline

import (
	"fmt"
	"testing"

	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// catalogResults are n results shaped as the catalog's functions report
// them on issue 13's package: two thirds apply-setters' (info, one per
// field set, with resourceRef, field path and file), one third
// set-namespace's (a warning per resource, with resourceRef).
func catalogResults(n int) []*kptv1.Result {
	rs := make([]*kptv1.Result, n)
	for i := range rs {
		ref := &yaml.ResourceIdentifier{TypeMeta: yaml.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			NameMeta: yaml.NameMeta{Name: fmt.Sprintf("app-%d", i/3), Namespace: "example"}}
		if i%3 == 2 {
			rs[i] = &kptv1.Result{Severity: kptv1.Warning, ResourceRef: ref,
				Message: fmt.Sprintf("Resource(apiVersion=apps/v1, kind=Deployment, namespace=example, name=app-%d) does not have upstream origin.", i/3)}
			continue
		}
		rs[i] = &kptv1.Result{Severity: kptv1.Info, ResourceRef: ref,
			Message: fmt.Sprintf("set field value to %q", fmt.Sprintf("registry.example.com/app-%d:v1.2.3", i/3)),
			Field:   &kptv1.Field{Path: "spec.template.spec.containers[=app].image"},
			File:    &kptv1.File{Path: fmt.Sprintf("deployments/app-%d.yaml", i/3)}}
	}
	return rs
}

// BenchmarkStatusWrite compares what kptr pays to write a Kptfile status
// of 15,000 results (issue 26: the catalog's volumes at about 7,000
// resources) with what writing 15,000 small YAML items of the same shape
// costs with the project's own encoder:
//
//   - status: setStatus (the Kptfile's node read back into a KptFile, the
//     status built, marshalled, decoded into the node that replaces it)
//     and the Kptfile's bytes as encodeFiles writes them: all a render
//     does with the results once the functions ran;
//   - items/encode: the results' nodes, built beforehand, appended as the
//     items of one list by fastyaml, the floor;
//   - items/build+encode: the same with the nodes built in the loop
//     (kptfile/v1.ResultsNode), as a status write must.
func BenchmarkStatusWrite(b *testing.B) {
	const n = 15000
	rs := catalogResults(n)
	steps := []kptv1.PipelineStepResult{
		{Image: "ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2", Results: rs[:n*2/3]},
		{Image: "ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4", Results: rs[n*2/3:]},
	}
	const kf = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n  annotations:\n" +
		"    config.kubernetes.io/path: 'Kptfile'\n    internal.config.kubernetes.io/path: 'Kptfile'\n" +
		"pipeline:\n  mutators:\n  - image: apply-setters:v0.2\n    configPath: setters.yaml\n  - image: set-namespace:v0.4\n"
	var size int
	b.Run("status", func(b *testing.B) {
		r := &renderer{mutationSteps: steps}
		for b.Loop() {
			nodes := []*yaml.RNode{yaml.MustParse(kf)}
			if err := r.setStatus(nodes, nil); err != nil {
				b.Fatal(err)
			}
			files, err := encodeFiles(nodes)
			if err != nil {
				b.Fatal(err)
			}
			size = len(files["Kptfile"])
		}
		b.ReportMetric(float64(size)/(1<<20), "MiB-written")
	})
	items, ok := kptv1.ResultsNode(rs)
	if !ok {
		b.Fatal("results not modelled")
	}
	encode := func(b *testing.B, items *yaml.Node) []byte {
		buf := make([]byte, 0, 4<<20)
		for _, it := range items.Content {
			var ok bool
			if buf, ok = fastyaml.AppendSeqItem(buf, it, fastyaml.Compact); !ok {
				b.Fatal("fastyaml declined an item")
			}
		}
		return buf
	}
	b.Run("items/encode", func(b *testing.B) {
		for b.Loop() {
			size = len(encode(b, items))
		}
		b.ReportMetric(float64(size)/(1<<20), "MiB-written")
	})
	b.Run("items/build+encode", func(b *testing.B) {
		for b.Loop() {
			items, _ := kptv1.ResultsNode(rs)
			size = len(encode(b, items))
		}
		b.ReportMetric(float64(size)/(1<<20), "MiB-written")
	})
}
