package pipeline

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// This file writes package files as kyaml's LocalPackageWriter does
// (kioutil.DefaultPathAndIndexAnnotation, kioutil.SortNodes, kio.ByteWriter
// per file), with the same bytes, without their per-resource costs: the
// writer's deep copy of every resource (here only the nodes on the path to
// the cleared annotations are copied) and the map of all metadata GetMeta
// builds for every comparison of the sort. Resources of any unusual shape
// take kyaml's own code. encode_test.go compares both on the corpora.

// copyLegacyAnnotations is kioutil.CopyLegacyAnnotations.
func copyLegacyAnnotations(rn *yaml.RNode) error {
	_, _, ann, _, _, ok := metaNodes(rn)
	if !ok {
		return kioutil.CopyLegacyAnnotations(rn)
	}
	if ann == nil {
		return nil
	}
	for _, p := range [][2]string{
		{kioutil.LegacyPathAnnotation, kioutil.PathAnnotation},   //nolint:staticcheck
		{kioutil.LegacyIndexAnnotation, kioutil.IndexAnnotation}, //nolint:staticcheck
		{kioutil.LegacyIdAnnotation, kioutil.IdAnnotation},       //nolint:staticcheck
	} {
		legacy, _ := lookupLast(ann, p[0])
		cur, _ := lookupLast(ann, p[1])
		var err error
		switch {
		case cur != "" && legacy == "":
			err = setAnnotation(rn, p[0], cur)
		case cur == "" && legacy != "":
			err = setAnnotation(rn, p[1], legacy)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// defaultPathAndIndex is kioutil.DefaultPathAndIndexAnnotation("", nodes).
func defaultPathAndIndex(nodes []*yaml.RNode) error {
	counts := map[string]int{}
	for _, n := range nodes {
		if err := copyLegacyAnnotations(n); err != nil {
			return err
		}
		get := annotationOf(n)
		if p, found := get(kioutil.PathAnnotation); found {
			if i, found := get(kioutil.IndexAnnotation); found {
				if index, _ := strconv.Atoi(i); index > counts[p] {
					counts[p] = index
				}
			}
			continue
		}
		m, err := n.GetMeta()
		if err != nil {
			return err
		}
		path := kioutil.CreatePathAnnotationValue("", m)
		if err := setAnnotation(n, kioutil.PathAnnotation, path); err != nil {
			return err
		}
		if err := setAnnotation(n, kioutil.LegacyPathAnnotation, path); err != nil { //nolint:staticcheck
			return err
		}
	}
	for _, n := range nodes {
		get := annotationOf(n)
		if _, found := get(kioutil.IndexAnnotation); found {
			continue
		}
		p, _ := get(kioutil.PathAnnotation)
		c := counts[p]
		counts[p] = c + 1
		if err := setAnnotation(n, kioutil.IndexAnnotation, strconv.Itoa(c)); err != nil {
			return err
		}
		if err := setAnnotation(n, kioutil.LegacyIndexAnnotation, strconv.Itoa(c)); err != nil { //nolint:staticcheck
			return err
		}
	}
	return nil
}

// sortNodes is kioutil.SortNodes: by path, then index (none first), stable;
// its comparator's quirks kept (an unparsable index stops all ordering
// from then on and is returned).
func sortNodes(nodes []*yaml.RNode) error {
	if len(nodes) < 2 {
		return nil // the comparator, and so CopyLegacyAnnotations, never runs
	}
	type keyed struct {
		n           *yaml.RNode
		path, index string
	}
	ks := make([]keyed, len(nodes))
	for i, n := range nodes {
		_ = copyLegacyAnnotations(n)
		get := annotationOf(n)
		ks[i].n = n
		ks[i].path, _ = get(kioutil.PathAnnotation)
		ks[i].index, _ = get(kioutil.IndexAnnotation)
	}
	var err error
	sort.SliceStable(ks, func(i, j int) bool {
		if err != nil {
			return false
		}
		a, b := ks[i], ks[j]
		if a.path != b.path {
			return a.path < b.path
		}
		if a.index == b.index {
			return false
		}
		if a.index == "" {
			return true
		}
		if b.index == "" {
			return false
		}
		var ai, bi int
		if ai, err = strconv.Atoi(a.index); err != nil {
			err = fmt.Errorf("unable to parse config.kubernetes.io/index %s :%v", a.index, err)
			return false
		}
		if bi, err = strconv.Atoi(b.index); err != nil {
			err = fmt.Errorf("unable to parse config.kubernetes.io/index %s :%v", b.index, err)
			return false
		}
		return ai < bi
	})
	for i := range ks {
		nodes[i] = ks[i].n
	}
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	return nil
}

// readerAnnotations are what ByteWriter removes unless KeepReaderAnnotations.
var readerAnnotations = []string{kioutil.IndexAnnotation, kioutil.LegacyIndexAnnotation, kioutil.SeqIndentAnnotation} //nolint:staticcheck

// fileAnnotationsToClear are what a package file never shows.
var fileAnnotationsToClear = []string{kioutil.PathAnnotation, kioutil.LegacyPathAnnotation, pkgPathAnnotation} //nolint:staticcheck

// writerView is the document ByteWriter would encode for rn after clearing
// keys and empty annotations/metadata on its copy: rn's own nodes, with
// copies only of the document, root, metadata and annotations nodes that
// change. ok is false for a shape the writer must handle itself.
func writerView(rn *yaml.RNode, clear []string) (doc *yaml.Node, wide bool, ok bool) {
	root, md, ann, mi, ai, ok := metaNodes(rn)
	if !ok {
		return nil, false, false
	}
	if i, _ := uniqueField(root, yaml.BareSeqNodeWrappingKey); i >= 0 {
		return nil, false, false
	}
	doc = rn.Document()
	if md == nil {
		return doc, false, true
	}
	var annContent []*yaml.Node
	if ann != nil {
		s, _ := lookupLast(ann, kioutil.SeqIndentAnnotation)
		wide = s == string(yaml.WideSequenceStyle)
		annContent = ann.Content
		for _, k := range clear {
			for j := 0; j+1 < len(annContent); j += 2 {
				if annContent[j].Value == k {
					annContent = append(append(make([]*yaml.Node, 0, len(annContent)-2), annContent[:j]...), annContent[j+2:]...)
					break
				}
			}
		}
	}
	mdContent := md.Content
	switch {
	case ann != nil && len(annContent) == 0:
		mdContent = append(append(make([]*yaml.Node, 0, len(mdContent)-2), mdContent[:ai]...), mdContent[ai+2:]...)
	case ann != nil && len(annContent) != len(ann.Content):
		a := *ann
		a.Content = annContent
		mdContent = append([]*yaml.Node(nil), mdContent...)
		mdContent[ai+1] = &a
	}
	if len(mdContent) > 0 && len(mdContent) == len(md.Content) && (ann == nil || len(annContent) == len(ann.Content)) {
		return doc, wide, true // nothing cleared
	}
	r := *root
	if len(mdContent) == 0 {
		r.Content = append(append(make([]*yaml.Node, 0, len(root.Content)-2), root.Content[:mi]...), root.Content[mi+2:]...)
	} else {
		m := *md
		m.Content = mdContent
		r.Content = append([]*yaml.Node(nil), root.Content...)
		r.Content[mi+1] = &m
	}
	if doc.Kind == yaml.DocumentNode {
		d := *doc
		d.Content = []*yaml.Node{&r}
		return &d, wide, true
	}
	return &r, wide, true
}

// writeDocuments is kio.ByteWriter{Writer: buf, KeepReaderAnnotations:
// keepReader, ClearAnnotations: clear}.Write(nodes).
func writeDocuments(buf *bytes.Buffer, nodes []*yaml.RNode, keepReader bool, clear []string) error {
	bw := kio.ByteWriter{Writer: buf, KeepReaderAnnotations: keepReader, ClearAnnotations: clear}
	if len(nodes) == 1 {
		if p, _, _ := fileAnnotations(nodes[0]); p != "" {
			for _, glob := range kio.JSONMatch {
				if m, _ := filepath.Match(glob, filepath.Base(p)); m {
					return bw.Write(nodes) // JSON
				}
			}
		}
	}
	all := clear
	if !keepReader {
		all = append(append([]string(nil), readerAnnotations...), clear...)
	}
	docs := make([]*yaml.Node, len(nodes))
	wide := make([]bool, len(nodes))
	for i, n := range nodes {
		d, w, ok := writerView(n, all)
		if !ok {
			return bw.Write(nodes)
		}
		docs[i], wide[i] = d, w
	}
	return encodeStream(buf, docs, wide)
}

// encodeStream writes docs as one kyaml encoder writes them, each with its
// sequence indentation: fastyaml, or yaml.v3 when fastyaml cannot take a
// document or a document but the last would end the stream open ("...").
func encodeStream(buf *bytes.Buffer, docs []*yaml.Node, wide []bool) error {
	out := buf.AvailableBuffer()
	fast := true
	for i, d := range docs {
		if i > 0 {
			out = append(out, "---\n"...)
		}
		start := len(out)
		style := fastyaml.Compact
		if wide[i] {
			style = fastyaml.Wide
		}
		var ok bool
		if out, ok = fastyaml.AppendDocument(out, d, style); !ok || (i < len(docs)-1 && bytes.HasSuffix(out[start:], []byte("...\n"))) {
			fast = false
			break
		}
	}
	if fast {
		buf.Write(out)
		return nil
	}
	e := yaml.NewEncoder(buf)
	for i, d := range docs {
		if wide[i] {
			e.DefaultSeqIndent()
		} else {
			e.CompactSeqIndent()
		}
		if err := e.Encode(d); err != nil {
			return err
		}
	}
	return e.Close()
}
