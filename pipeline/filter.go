package pipeline

import (
	"io"
	"path"
	"strconv"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/comments"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/order"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// runFilter is kyaml's runtimeutil.FunctionFilter with global scope (what
// kpt uses for every call), with the same ResourceList in and out, but the
// comment and field-order copy-back done by copyBackFast wherever it can
// (kyaml's CopyComments and SyncOrder deep-copy and reflect over every
// node, which dominated large renders).
// The output is read within lim (OutputLimits). When the caller discards the
// output (keep false: a validator's, which kpt runs on deep copies and
// throws away), the copy-back is only checked for the error kpt would fail
// the function with (copyBackError): the output's comments and field order
// are left as the function printed them.
func runFilter(run func(in []byte) (out []byte, err error), fnConfig *yaml.RNode, input []*yaml.RNode, lim OutputLimits, keep bool) ([]*yaml.RNode, *yaml.RNode, error) {
	functionDir, err := functionScope(fnConfig)
	if err != nil {
		return nil, nil, err
	}
	ids := make(map[string]*yaml.RNode, len(input))
	errs := make([]error, len(input))
	parallel(len(input), func(i int) {
		id := strconv.Itoa(i + 1)
		errs[i] = setAnnotations(input[i], kioutil.IdAnnotation, id, kioutil.LegacyIdAnnotation, id) //nolint:staticcheck
	})
	for i, n := range input {
		if errs[i] != nil {
			return nil, nil, errs[i]
		}
		ids[strconv.Itoa(i+1)] = n
	}
	in, err := encodeResourceList(input, fnConfig)
	if err != nil {
		return nil, nil, err
	}
	out, exit := run(in.data)
	output, results, reused, err := readResourceList(out, in, input, lim)
	if err != nil {
		return nil, nil, err
	}
	cb := copyBack
	if !keep {
		cb = copyBackError
	}
	if err := copyBackAll(output, reused, ids, cb); err != nil {
		return nil, nil, err
	}
	if exit != nil {
		return output, results, exit
	}
	for _, n := range output {
		// DefaultPathAnnotation is a no-op for a resource whose path and
		// index annotations are both set in both spellings
		if a := annotationsOf(n); a.get(kioutil.PathAnnotation) != "" && a.get(kioutil.LegacyPathAnnotation) != "" && //nolint:staticcheck
			(a.get(kioutil.IndexAnnotation) == "") == (a.get(kioutil.LegacyIndexAnnotation) == "") && //nolint:staticcheck
			a.get(kioutil.IdAnnotation) == "" && a.get(kioutil.LegacyIdAnnotation) == "" { //nolint:staticcheck
			continue
		}
		if err := kioutil.DefaultPathAnnotation(functionDir, []*yaml.RNode{n}); err != nil {
			return nil, nil, err
		}
	}
	return output, results, nil
}

// copyBackAll copies back, onto every output item that is not the input's
// own node (reused), the comments and field order of the input item its id
// names (ids), with cb, and removes the ids. The items are independent of
// each other, so they are done in parallel (kptr's own time between two
// functions is otherwise spent on one core while the other is idle); an
// input item that two output items name is copied back onto them one after
// the other, and so is a node the output holds twice. The error is the one a loop in item order would return first.
func copyBackAll(output []*yaml.RNode, reused []bool, ids map[string]*yaml.RNode, cb func(from, to *yaml.RNode) error) error {
	from := make([]*yaml.RNode, len(output))
	named := make(map[*yaml.RNode]int, len(output))
	shared := false
	for i, n := range output {
		if named[n]++; named[n] > 1 {
			shared = true // the same node twice
		}
		if reused[i] {
			continue
		}
		a := annotationsOf(n)
		id := a.get(kioutil.IdAnnotation)
		if id == "" {
			id = a.get(kioutil.LegacyIdAnnotation) //nolint:staticcheck
		}
		if f, ok := ids[id]; id != "" && ok {
			from[i] = f
			if named[f]++; named[f] > 1 {
				shared = true
			}
		}
	}
	errs := make([]error, len(output))
	one := func(i int) {
		n := output[i]
		if reused[i] {
			// the input's own nodes: nothing to copy back
			errs[i] = clearAnnotations(n, kioutil.IdAnnotation, kioutil.LegacyIdAnnotation) //nolint:staticcheck
			return
		}
		if from[i] == nil {
			return
		}
		if err := cb(from[i], n); err != nil {
			errs[i] = err
			return
		}
		errs[i] = clearAnnotations(n, kioutil.IdAnnotation, kioutil.LegacyIdAnnotation) //nolint:staticcheck
	}
	if shared {
		for i := range output {
			if one(i); errs[i] != nil {
				return errs[i]
			}
		}
		return nil
	}
	parallel(len(output), one)
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// copyBack gives to, a function's output for the input resource from, the
// comments and field order of from, as kyaml's CopyComments then SyncOrder
// do (failing where they fail), taking copyBackFast wherever it is sure of
// kyaml's result. from is left as it is. A variable only so that tests can
// count its calls.
var copyBack = func(from, to *yaml.RNode) error {
	if copyBackFast(from, to) {
		return nil
	}
	// copyBackAll runs this on every core: kyaml's walker, for the rare
	// shapes it gets, runs one pair at a time (its OpenAPI schema is
	// global state, and kyaml is not written for concurrent use)
	kyamlSerial.Lock()
	defer kyamlSerial.Unlock()
	if err := comments.CopyComments(from, to); err != nil {
		return err
	}
	return order.SyncOrder(from, to)
}

// kyamlSerial serialises copyBack's calls into kyaml.
var kyamlSerial sync.Mutex

// copyBackError is copyBack for an output that is discarded: it returns the
// error copyBack would return, and runs copyBack (leaving to in any state)
// only where copyBackCheck cannot rule that error out.
func copyBackError(from, to *yaml.RNode) error {
	if f, t := from.YNode(), to.YNode(); f != nil && t != nil && copyBackCheck(f, t) {
		return nil
	}
	return copyBack(from, to)
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

// writeResourceList writes the ResourceList a function reads (see
// encodeResourceList).
func writeResourceList(w io.Writer, nodes []*yaml.RNode, fnConfig *yaml.RNode) error {
	l, err := encodeResourceList(nodes, fnConfig)
	if err != nil {
		return err
	}
	_, err = w.Write(l.data)
	return err
}

func encodeDoc(w io.Writer, n *yaml.Node) error {
	e := yaml.NewEncoder(w)
	if err := e.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}); err != nil {
		return err
	}
	return e.Close()
}
