package pipeline

import (
	"bytes"
	"io"
	"path"
	"strconv"

	"sigs.k8s.io/kustomize/kyaml/comments"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/order"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// runFilter is kyaml's runtimeutil.FunctionFilter with global scope (what
// kpt uses for every call), with the same ResourceList in and out, but a
// fast path for the comment and field-order copy-back: when neither the
// input nor the output resource has a comment, the output has no folded
// scalar and its fields already follow the input's order, kyaml's
// CopyComments and SyncOrder would change nothing, so they are skipped
// (they deep-copy and reflect over every node, which dominated large renders).
func runFilter(run func(io.Reader, io.Writer) error, fnConfig *yaml.RNode, input []*yaml.RNode) ([]*yaml.RNode, *yaml.RNode, error) {
	functionDir, err := functionScope(fnConfig)
	if err != nil {
		return nil, nil, err
	}
	ids := make(map[string]*yaml.RNode, len(input))
	for i, n := range input {
		id := strconv.Itoa(i + 1)
		if err := setAnnotation(n, kioutil.IdAnnotation, id); err != nil {
			return nil, nil, err
		}
		if err := setAnnotation(n, kioutil.LegacyIdAnnotation, id); err != nil { //nolint:staticcheck
			return nil, nil, err
		}
		ids[id] = n
	}
	var in, out bytes.Buffer
	if err := writeResourceList(&in, input, fnConfig); err != nil {
		return nil, nil, err
	}
	exit := run(&in, &out)
	r := &kio.ByteReader{Reader: &out}
	output, err := r.Read()
	if err != nil {
		return nil, nil, err
	}
	for _, n := range output {
		id := annotation(n, kioutil.IdAnnotation)
		if id == "" {
			id = annotation(n, kioutil.LegacyIdAnnotation) //nolint:staticcheck
		}
		from, ok := ids[id]
		if id == "" || !ok {
			continue
		}
		if !(noDocComments(from) && noComments(from.YNode()) && noComments(n.YNode()) && noFolded(n.YNode()) && inOrder(from.YNode(), n.YNode())) {
			if err := comments.CopyComments(from, n); err != nil {
				return nil, nil, err
			}
			if err := order.SyncOrder(from, n); err != nil {
				return nil, nil, err
			}
		}
		if err := clearAnnotation(n, kioutil.IdAnnotation); err != nil {
			return nil, nil, err
		}
		if err := clearAnnotation(n, kioutil.LegacyIdAnnotation); err != nil { //nolint:staticcheck
			return nil, nil, err
		}
	}
	if exit != nil {
		return output, r.Results, exit
	}
	for _, n := range output {
		// DefaultPathAnnotation is a no-op for a resource whose path and
		// index annotations are both set in both spellings
		if annotation(n, kioutil.PathAnnotation) != "" && annotation(n, kioutil.LegacyPathAnnotation) != "" && //nolint:staticcheck
			(annotation(n, kioutil.IndexAnnotation) == "") == (annotation(n, kioutil.LegacyIndexAnnotation) == "") && //nolint:staticcheck
			annotation(n, kioutil.IdAnnotation) == "" && annotation(n, kioutil.LegacyIdAnnotation) == "" { //nolint:staticcheck
			continue
		}
		if err := kioutil.DefaultPathAnnotation(functionDir, []*yaml.RNode{n}); err != nil {
			return nil, nil, err
		}
	}
	return output, r.Results, nil
}

// functionScope is the directory of a functionConfig read from a file (its
// parent when that directory is named "functions"), where new resources go.
func functionScope(fnConfig *yaml.RNode) (string, error) {
	if fnConfig == nil {
		return "", nil
	}
	m, err := fnConfig.GetMeta()
	if err != nil {
		return "", err
	}
	p, ok := m.Annotations[kioutil.PathAnnotation]
	if !ok {
		if p, ok = m.Annotations[kioutil.LegacyPathAnnotation]; !ok { //nolint:staticcheck
			return "", nil
		}
	}
	dir := path.Clean(path.Dir(p))
	if path.Base(dir) == "functions" {
		dir = path.Dir(dir)
	}
	return dir, nil
}

func noComments(n *yaml.Node) bool {
	if n.HeadComment != "" || n.LineComment != "" || n.FootComment != "" {
		return false
	}
	for _, c := range n.Content {
		if !noComments(c) {
			return false
		}
	}
	return true
}

// noDocComments: a document's own comments (a license header followed by a
// blank line) are copied onto the output resource by CopyComments.
func noDocComments(rn *yaml.RNode) bool {
	d := rn.Document()
	return d.HeadComment == "" && d.LineComment == "" && d.FootComment == ""
}

func noFolded(n *yaml.Node) bool {
	if n.Style&yaml.FoldedStyle != 0 {
		return false
	}
	for _, c := range n.Content {
		if !noFolded(c) {
			return false
		}
	}
	return true
}

// inOrder reports whether SyncOrder(from, to) would leave to as it is: in
// every mapping, to's fields shared with from come first and in from's
// order; sequences are compared element by element.
func inOrder(from, to *yaml.Node) bool {
	if from.Kind == yaml.DocumentNode && to.Kind == yaml.DocumentNode && len(from.Content) > 0 && len(to.Content) > 0 {
		return inOrder(from.Content[0], to.Content[0])
	}
	switch {
	case from.Kind == yaml.MappingNode && to.Kind == yaml.MappingNode:
		pos := make(map[string]int, len(from.Content)/2)
		for i := 0; i+1 < len(from.Content); i += 2 {
			pos[from.Content[i].Value] = i
		}
		last, residual := -1, false
		for i := 0; i+1 < len(to.Content); i += 2 {
			fi, ok := pos[to.Content[i].Value]
			if !ok {
				residual = true
				continue
			}
			if residual || fi < last {
				return false
			}
			last = fi
			if !inOrder(from.Content[fi+1], to.Content[i+1]) {
				return false
			}
		}
	case from.Kind == yaml.SequenceNode && to.Kind == yaml.SequenceNode:
		for i := 0; i < len(from.Content) && i < len(to.Content); i++ {
			if !inOrder(from.Content[i], to.Content[i]) {
				return false
			}
		}
	}
	return true
}

// writeResourceList writes what kio.ByteWriter{KeepReaderAnnotations: true,
// WrappingKind: ResourceList, FunctionConfig: fnConfig} writes, item by item:
// yaml.v3's emitter keeps every event of a document in one growing queue, so
// a single 10k-item document cost gigabytes of allocations; items encoded
// a few dozen at a time produce the same bytes with bounded memory, and without
// ByteWriter's deep copy of every node.
func writeResourceList(w io.Writer, nodes []*yaml.RNode, fnConfig *yaml.RNode) error {
	if len(nodes) == 0 {
		return kio.ByteWriter{Writer: w, KeepReaderAnnotations: true, FunctionConfig: fnConfig,
			WrappingAPIVersion: kio.ResourceListAPIVersion, WrappingKind: kio.ResourceListKind}.Write(nodes)
	}
	if _, err := io.WriteString(w, "apiVersion: "+kio.ResourceListAPIVersion+"\nkind: "+kio.ResourceListKind+"\nitems:\n"); err != nil {
		return err
	}
	const chunk = 64
	for i := 0; i < len(nodes); i += chunk {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, n := range nodes[i:min(i+chunk, len(nodes))] {
			if err := clearEmptyAnnotations(n); err != nil {
				return err
			}
			seq.Content = append(seq.Content, n.YNode())
		}
		if err := encodeDoc(w, seq); err != nil {
			return err
		}
	}
	if fnConfig != nil {
		m := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: "functionConfig"}, fnConfig.YNode()}}
		return encodeDoc(w, m)
	}
	return nil
}

func encodeDoc(w io.Writer, n *yaml.Node) error {
	e := yaml.NewEncoder(w)
	if err := e.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}); err != nil {
		return err
	}
	return e.Close()
}
