package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ResultList is kpt's kpt.dev/v1 FunctionResultList: one item per function run.
type ResultList struct {
	yaml.ResourceMeta `yaml:",inline"`
	ExitCode          int        `yaml:"exitCode"`
	Items             []FnResult `yaml:"items,omitempty"`
}

// FnResult is one function run as kpt records it.
type FnResult struct {
	Image    string          `yaml:"image,omitempty"`
	ExecPath string          `yaml:"exec,omitempty"`
	Stderr   string          `yaml:"stderr,omitempty"`
	ExitCode int             `yaml:"exitCode"`
	Results  []*kptv1.Result `yaml:"results,omitempty"`
}

func newResultList() *ResultList {
	return &ResultList{ResourceMeta: yaml.ResourceMeta{
		TypeMeta:   yaml.TypeMeta{APIVersion: "kpt.dev/v1", Kind: "FunctionResultList"},
		ObjectMeta: yaml.ObjectMeta{NameMeta: yaml.NameMeta{Name: "fnresults"}},
	}}
}

// writeResults writes b (marshalResults) to dir/results.yaml and returns its path.
func writeResults(dir string, b []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("failed to save function results: %w", err)
	}
	p := filepath.Join(dir, "results.yaml")
	if err := writeFileAtomic(p, b, 0o644); err != nil {
		return "", fmt.Errorf("failed to save function results: %w", err)
	}
	return p, nil
}

// marshalResults is rl as kyaml.MarshalWithOptions writes it (wide
// sequences), built as a node tree instead of by reflection: results.yaml of
// a large render holds thousands of results.
func marshalResults(rl *ResultList) ([]byte, error) {
	if b, ok := marshalResultsFast(rl); ok {
		return b, nil
	}
	return marshalResultsReflect(rl)
}

func marshalResultsReflect(rl *ResultList) ([]byte, error) {
	return yaml.MarshalWithOptions(rl, &yaml.EncoderOptions{SeqIndent: yaml.WideSequenceStyle})
}

// marshalResultsFast writes the header by reflection, then "items:" (the
// last field) from a node tree: each item is the PipelineStepResult it
// equals field for field (image, exec, stderr, exitCode, results; no name,
// error or errorResults). ok is false when there are no items or an item
// holds a value the builders do not model.
func marshalResultsFast(rl *ResultList) ([]byte, bool) {
	if len(rl.Items) == 0 {
		return nil, false
	}
	items := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: make([]*yaml.Node, 0, len(rl.Items))}
	for _, it := range rl.Items {
		s := kptv1.PipelineStepResult{Image: it.Image, Exec: it.ExecPath, Stderr: it.Stderr, ExitCode: it.ExitCode, Results: it.Results}
		in, ok := kptv1.StepNode(&s)
		if !ok {
			return nil, false
		}
		items.Content = append(items.Content, in)
	}
	head := *rl
	head.Items = nil
	b, err := marshalResultsReflect(&head)
	if err != nil {
		return nil, false
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: "items"}, items}}
	return kptv1.AppendNode(b, doc, string(yaml.WideSequenceStyle))
}

// parseResults reads a ResourceList's results as kpt does: a list, or a
// legacy {items: [...]} wrapper; resourceRef.metadata.{name,namespace} is
// lifted into resourceRef.
func parseResults(node *yaml.RNode) ([]*kptv1.Result, error) {
	if node.IsNilOrEmpty() {
		return nil, nil
	}
	if node.YNode().Kind == yaml.MappingNode {
		items, err := node.Pipe(yaml.Lookup("items"))
		if err != nil {
			return nil, err
		}
		if !items.IsNilOrEmpty() {
			node = items
		}
	}
	// kpt prints the node and unmarshals the text; decoding the node is
	// the same but for the line numbers of an error, so a failure is
	// redone kpt's way (6,000 setter results spent a fifth of a render's
	// own time printing and parsing them again)
	var out []*kptv1.Result
	if err := node.YNode().Decode(&out); err != nil {
		out = nil
		if err := yaml.Unmarshal([]byte(node.MustString()), &out); err != nil {
			return nil, err
		}
	}
	elems, err := node.Elements()
	if err != nil {
		return out, nil
	}
	for i := range elems {
		if i >= len(out) || out[i] == nil {
			continue
		}
		md, _ := elems[i].Pipe(yaml.Lookup("resourceRef", "metadata"))
		if md == nil {
			continue
		}
		if out[i].ResourceRef == nil {
			out[i].ResourceRef = &yaml.ResourceIdentifier{}
		}
		if n, _ := md.Pipe(yaml.Lookup("name")); n != nil {
			out[i].ResourceRef.Name = strings.TrimSpace(n.MustString())
		}
		if n, _ := md.Pipe(yaml.Lookup("namespace")); n != nil {
			if ns := strings.TrimSpace(n.MustString()); ns != "" && ns != "''" {
				out[i].ResourceRef.Namespace = ns
			}
		}
	}
	return out, nil
}
