// Package framework declares, in kptr's own code, the result types of the
// KRM functions specification with the shape kyaml's fn/framework gives
// them (see Result). It is named framework because its types' names show in
// what kpt users read: yaml.v3 names the Go type it could not decode a
// function's results into ("cannot unmarshal !!seq into framework.Result"),
// and kpt's message must stay kptr's. Use them through kptv1's aliases.
package framework

import (
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Result is one item of a function's results, kpt's (and the KRM functions
// specification's) shape, field for field and tag for tag that of kyaml's
// fn/framework.Result. kptr declares its own so that the kptr binary does
// not link fn/framework: through kube-openapi's validate package it costs
// every kptr process, and so every sandbox's container init (a fresh start
// of the kptr binary), ~3 ms of package initialisation (strfmt's and
// govalidator's regexps; GODEBUG=inittrace=1).
type Result struct {
	Message     string                   `yaml:"message,omitempty" json:"message,omitempty"`
	Severity    Severity                 `yaml:"severity,omitempty" json:"severity,omitempty"`
	ResourceRef *yaml.ResourceIdentifier `yaml:"resourceRef,omitempty" json:"resourceRef,omitempty"`
	Field       *Field                   `yaml:"field,omitempty" json:"field,omitempty"`
	File        *File                    `yaml:"file,omitempty" json:"file,omitempty"`
	Tags        map[string]string        `yaml:"tags,omitempty" json:"tags,omitempty"`
}

// String is the line kpt prints for r in its transcript, as
// framework.Result.String writes it: "[severity] apiVersion/kind/namespace/name
// field.path: message", the parts that are empty left out, "info" when the
// severity is.
func (r Result) String() string {
	sev := r.Severity
	if sev == "" {
		sev = Info
	}
	var b strings.Builder
	b.WriteString("[" + string(sev) + "]")
	if id := r.ResourceRef; id != nil {
		var parts []string
		for _, p := range []string{id.APIVersion, id.Kind, id.Namespace, id.Name} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			b.WriteString(" " + strings.Join(parts, "/"))
		}
	}
	if r.Field != nil {
		b.WriteString(" " + r.Field.Path)
	}
	b.WriteString(": " + r.Message)
	return b.String()
}

// Severity of a Result.
type Severity string

// Severities a function may give a Result ("" reads as info).
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// File is the file a Result is about.
type File struct {
	Path  string `yaml:"path,omitempty" json:"path,omitempty"`
	Index int    `yaml:"index,omitempty" json:"index,omitempty"`
}

// Field is the field a Result is about, with its current and proposed
// values.
type Field struct {
	Path          string `yaml:"path,omitempty" json:"path,omitempty"`
	CurrentValue  any    `yaml:"currentValue,omitempty" json:"currentValue,omitempty"`
	ProposedValue any    `yaml:"proposedValue,omitempty" json:"proposedValue,omitempty"`
}
