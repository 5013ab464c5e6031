package v1

import (
	"strconv"

	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The status and results are written from node trees built field by field
// instead of yaml.v3's reflecting encoder (a 5,000-resource render's status
// holds ~8,000 results; reflection over them was a third of kptr's own
// work). Every builder gives exactly the node whose encoding is the bytes
// yaml.v3 writes for the Go value (field order, omitempty, string styles;
// encode_test.go holds them to it), or reports ok=false for a value it does
// not model (invalid UTF-8, a nil item): callers then use reflection.

// mapping builds a block mapping; a failed value poisons it.
type mapping struct {
	n  *yaml.Node
	ok bool
}

func newMapping() *mapping {
	return &mapping{n: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, ok: true}
}

func (m *mapping) add(key string, v *yaml.Node, ok bool) {
	if !ok {
		m.ok = false
		return
	}
	m.n.Content = append(m.n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// str adds key: s, left out when s is empty and omitEmpty.
func (m *mapping) str(key, s string, omitEmpty bool) {
	if s == "" && omitEmpty {
		return
	}
	v, ok := fastyaml.StringNode(s)
	m.add(key, v, ok)
}

func (m *mapping) int(key string, i int, omitEmpty bool) {
	if i == 0 && omitEmpty {
		return
	}
	m.add(key, fastyaml.IntNode(int64(i)), true)
}

// scalar adds key: v for the scalar values a result's field carries
// (string, integers, bool), left out when v is nil (omitempty on an
// interface); any other value fails the builder.
func (m *mapping) scalar(key string, v any) {
	switch v := v.(type) {
	case nil:
	case string:
		m.str(key, v, false)
	case int:
		m.add(key, fastyaml.IntNode(int64(v)), true)
	case int64:
		m.add(key, fastyaml.IntNode(v), true)
	case bool:
		m.add(key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, true)
	default:
		m.ok = false
	}
}

func seq() *yaml.Node { return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"} }

// ResultsNode is the node of rs as yaml.v3 encodes []*Result.
func ResultsNode(rs []*Result) (*yaml.Node, bool) {
	s := seq()
	s.Content = make([]*yaml.Node, 0, len(rs))
	for _, r := range rs {
		n, ok := resultNode(r)
		if !ok {
			return nil, false
		}
		s.Content = append(s.Content, n)
	}
	return s, true
}

func resultNode(r *Result) (*yaml.Node, bool) {
	if r == nil {
		return nil, false
	}
	m := newMapping()
	m.str("message", r.Message, true)
	m.str("severity", string(r.Severity), true)
	if id := r.ResourceRef; id != nil {
		ref := newMapping()
		ref.str("apiVersion", id.APIVersion, true)
		ref.str("kind", id.Kind, true)
		ref.str("name", id.Name, true)
		ref.str("namespace", id.Namespace, true)
		m.add("resourceRef", ref.n, ref.ok)
	}
	if f := r.Field; f != nil {
		fm := newMapping()
		fm.str("path", f.Path, true)
		fm.scalar("currentValue", f.CurrentValue)
		fm.scalar("proposedValue", f.ProposedValue)
		m.add("field", fm.n, fm.ok)
	}
	if f := r.File; f != nil {
		fm := newMapping()
		fm.str("path", f.Path, true)
		fm.int("index", f.Index, true)
		m.add("file", fm.n, fm.ok)
	}
	if len(r.Tags) > 0 {
		keys := make([]string, 0, len(r.Tags))
		for k := range r.Tags {
			keys = append(keys, k)
		}
		fastyaml.SortKeys(keys)
		tm := newMapping()
		for _, k := range keys {
			kn, ok := fastyaml.StringNode(k)
			if !ok {
				return nil, false
			}
			v, ok := fastyaml.StringNode(r.Tags[k])
			tm.n.Content = append(tm.n.Content, kn, v)
			tm.ok = tm.ok && ok
		}
		m.add("tags", tm.n, tm.ok)
	}
	return m.n, m.ok
}

// StatusNode is the node of s as yaml.v3 encodes *Status.
func StatusNode(s *Status) (*yaml.Node, bool) {
	m := newMapping()
	if len(s.Conditions) > 0 {
		cs := seq()
		for _, c := range s.Conditions {
			cm := newMapping()
			cm.str("type", c.Type, false)
			cm.str("status", c.Status, false)
			cm.str("reason", c.Reason, true)
			cm.str("message", c.Message, true)
			if !cm.ok {
				return nil, false
			}
			cs.Content = append(cs.Content, cm.n)
		}
		m.add("conditions", cs, true)
	}
	if rs := s.RenderStatus; rs != nil {
		rm := newMapping()
		steps := func(key string, ss []PipelineStepResult) {
			if len(ss) == 0 {
				return
			}
			sn := seq()
			for i := range ss {
				n, ok := StepNode(&ss[i])
				if !ok {
					rm.ok = false
					return
				}
				sn.Content = append(sn.Content, n)
			}
			rm.add(key, sn, true)
		}
		steps("mutationSteps", rs.MutationSteps)
		steps("validationSteps", rs.ValidationSteps)
		rm.str("errorSummary", rs.ErrorSummary, true)
		m.add("renderStatus", rm.n, rm.ok)
	}
	return m.n, m.ok
}

// StepNode is the node of s as yaml.v3 encodes a PipelineStepResult.
func StepNode(s *PipelineStepResult) (*yaml.Node, bool) {
	m := newMapping()
	m.str("name", s.Name, true)
	m.str("image", s.Image, true)
	m.str("exec", s.Exec, true)
	m.str("executionError", s.ExecutionError, true)
	m.str("stderr", s.Stderr, true)
	m.int("exitCode", s.ExitCode, false)
	if len(s.Results) > 0 {
		n, ok := ResultsNode(s.Results)
		m.add("results", n, ok)
	}
	if len(s.ErrorResults) > 0 {
		n, ok := ResultsNode(s.ErrorResults)
		m.add("errorResults", n, ok)
	}
	return m.n, m.ok
}

// statusDocument is the node of {status: s}: what the status adds after
// the rest of a Kptfile (its last field), which is written by reflection.
func statusDocument(s *Status) (*yaml.Node, bool) {
	st, ok := StatusNode(s)
	if !ok {
		return nil, false
	}
	m := newMapping()
	m.add("status", st, true)
	return m.n, true
}

// seqStyle maps a kyaml sequence indent to fastyaml's.
func seqStyle(seqIndent string) fastyaml.SeqStyle {
	if seqIndent == string(yaml.WideSequenceStyle) {
		return fastyaml.Wide
	}
	return fastyaml.Compact
}

// AppendNode appends the bytes of n encoded as kyaml.MarshalWithOptions
// with seqIndent encodes a Go value (indent 2); ok is false when fastyaml
// declines n.
func AppendNode(buf []byte, n *yaml.Node, seqIndent string) ([]byte, bool) {
	return fastyaml.AppendDocument(buf, n, seqStyle(seqIndent))
}
