package pipeline

import (
	"fmt"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// resourceIDAnnotation pairs a function's output with its selected input.
const resourceIDAnnotation = "internal.config.kubernetes.io/kpt-resource-id"

func setResourceIDs(nodes []*yaml.RNode) error {
	for i, n := range nodes {
		if err := setAnnotation(n, resourceIDAnnotation, fmt.Sprint(i)); err != nil {
			return err
		}
	}
	return nil
}

func deleteResourceIDs(nodes []*yaml.RNode) error {
	for _, n := range nodes {
		if err := clearAnnotation(n, resourceIDAnnotation); err != nil {
			return err
		}
	}
	return nil
}

// selectInput keeps what matches any selector (all when there is none),
// then drops what matches any non-empty exclusion.
func selectInput(input []*yaml.RNode, selectors, exclusions []kptv1.Selector) []*yaml.RNode {
	if len(selectors) == 0 && len(exclusions) == 0 {
		return input
	}
	var out []*yaml.RNode
	for _, n := range input {
		selected := len(selectors) == 0
		for _, s := range selectors {
			if matches(n, s) {
				selected = true
				break
			}
		}
		if !selected {
			continue
		}
		excluded := false
		for _, e := range exclusions {
			if !e.IsEmpty() && matches(n, e) {
				excluded = true
				break
			}
		}
		if !excluded {
			out = append(out, n)
		}
	}
	return out
}

func matches(n *yaml.RNode, s kptv1.Selector) bool {
	if s.APIVersion != "" && n.GetApiVersion() != s.APIVersion {
		return false
	}
	if s.Kind != "" && n.GetKind() != s.Kind {
		return false
	}
	if s.Name != "" && n.GetName() != s.Name {
		return false
	}
	if s.Namespace != "" && n.GetNamespace() != s.Namespace {
		return false
	}
	if len(s.Labels) > 0 {
		l := n.GetLabels()
		for k, v := range s.Labels {
			if lv, ok := l[k]; !ok || lv != v {
				return false
			}
		}
	}
	if len(s.Annotations) > 0 {
		a := n.GetAnnotations()
		for k, v := range s.Annotations {
			if av, ok := a[k]; !ok || av != v {
				return false
			}
		}
	}
	return true
}

// mergeWithInput puts a selective function's output back: unselected
// resources stay in place, selected ones are replaced by their output (same
// id) or dropped if the function deleted them, new ones are appended.
func mergeWithInput(output, selected, input []*yaml.RNode) []*yaml.RNode {
	selectedIDs := map[string]bool{}
	for _, n := range selected {
		selectedIDs[n.GetAnnotations()[resourceIDAnnotation]] = true
	}
	outByID := map[string]*yaml.RNode{}
	var fresh []*yaml.RNode
	for _, n := range output {
		id, ok := n.GetAnnotations()[resourceIDAnnotation]
		if ok && selectedIDs[id] && outByID[id] == nil {
			outByID[id] = n
		} else {
			fresh = append(fresh, n)
		}
	}
	var result []*yaml.RNode
	for _, n := range input {
		id := n.GetAnnotations()[resourceIDAnnotation]
		if !selectedIDs[id] {
			result = append(result, n)
			continue
		}
		if o := outByID[id]; o != nil {
			result = append(result, o)
		}
	}
	return append(result, fresh...)
}
