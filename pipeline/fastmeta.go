package pipeline

import (
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Cheap accessors for the few metadata fields the pipeline reads on every
// resource of every call. RNode.GetAnnotations and GetMeta build maps of all
// labels and annotations; on 10k-resource packages that showed in profiles.

func mapField(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// annotation returns metadata.annotations[key] ("" when absent).
func annotation(rn *yaml.RNode, key string) string {
	v := mapField(mapField(mapField(rn.YNode(), "metadata"), "annotations"), key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

func pathAndIndex(rn *yaml.RNode) (string, string) {
	p := annotation(rn, kioutil.PathAnnotation)
	if p == "" {
		p = annotation(rn, kioutil.LegacyPathAnnotation) //nolint:staticcheck
	}
	i := annotation(rn, kioutil.IndexAnnotation)
	if i == "" {
		i = annotation(rn, kioutil.LegacyIndexAnnotation) //nolint:staticcheck
	}
	return p, i
}
